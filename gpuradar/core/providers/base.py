"""The shape of a provider declaration: what gpuradar knows about a provider without crawling
it. Plain data, no Scrapy: core, the command line, alerts and `recommend` read it through
the list in gpuradar.core.providers, and the provider's spider takes its name, endpoints,
options and the rest from it (crawler/spiders/base.py), so each fact is written once. Each
source's status (enabled or not, and why) is worded here too, so `gpuradar sources` tells
it without loading Scrapy or a spider."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, Self, TypeVar

__all__ = ["KINDS", "PAGE_MIN_INTERVAL", "PRICE_SOURCES", "Describe", "Family", "Options",
           "Provider", "cn_prefixed_mainland", "credentials_status", "family"]

#: The daemon's interval groups (`daemon.intervals.<kind>`). `page`: sources that read a
#: provider's pricing page, so that a shorter interval for the cloud APIs never makes
#: gpuradar ask a web site more often.
KINDS = ("marketplace", "lambda", "aws", "cloud", "page", "fx")

#: Where an offer's price was read: a provider's price API (`api`), or the list price printed
#: on its public pricing page (`list_page`), which says nothing of stock and may lag the bill.
PRICE_SOURCES = ("api", "list_page")

#: The shortest default interval of a source that reads pages: one request an hour per page
#: at most, out of courtesy to sites that are not APIs.
PAGE_MIN_INTERVAL = 3600


@dataclass(frozen=True)
class Family:
    """One row of a provider's interconnect table: the instance types `pattern` matches have
    GPUs linked by `intra` (for 2+ GPUs; "" = decide from the GPU's form factor) and
    machines linked by `inter` (None = no GPU fabric between machines)."""

    pattern: re.Pattern[str]
    intra: str | None
    inter: str | None
    note: str


def family(pattern: str, intra: str | None, inter: str | None, note: str) -> Family:
    """One row of an interconnect table (first match wins). Only families the provider's
    documentation describes belong here: an instance type no row matches is decided by
    the GPU's form factor or stays unknown (gpuradar.core.interconnect), never by a
    catch-all row."""
    return Family(re.compile(pattern, re.IGNORECASE), intra, inter, note)


def cn_prefixed_mainland(region: str) -> bool:
    """Region codes `cn-<city>` are in mainland China, except Hong Kong's (`cn-hongkong`,
    `cn-hk`): Alibaba's and Huawei's region lists."""
    r = region.lower()
    return r.startswith("cn-") and not r.startswith(("cn-hongkong", "cn-hk"))


class Options(Protocol):
    """What a status reads of a source's options: gpuradar.core.config.SourceOptions, which
    is not imported here because the config's schema is built from these declarations."""

    def get(self, name: str, default: Any = None) -> Any: ...

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self: ...


OptionsT = TypeVar("OptionsT", bound=Options)

#: A provider's own wording of its status, for a source the config file does not disable:
#: (its declaration, its options with the credentials the environment adds, its options as
#: the config file sets them) -> (enabled, why).
Describe = Callable[["Provider", Options, Options], tuple[bool, str]]


def credentials_status(provider: Provider, opts: Options, configured: Options
                       ) -> tuple[bool, str]:
    """The status of a provider without a wording of its own: which credentials it found or
    which setting would enable (or add to) it."""
    missing = [f"{env} (or sources.{provider.name}.{opt})"
               for opt, env in provider.credentials.items() if not opts.get(opt)]
    if provider.requires_credentials and missing:
        return False, "needs " + " and ".join(missing)
    if provider.credentials and not missing:
        return True, "credentials found"
    if provider.credentials:
        return True, "public endpoint; " + ", ".join(missing) + " would add more"
    if provider.reads_pages:
        return True, "public pricing page (list prices)"
    return True, "public endpoint"


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Provider:
    """Everything about one source that does not need a crawl."""

    #: The source's name: spider name, `sources.<name>` in the config, PriceItem.source.
    name: str
    #: The daemon's interval group (one of KINDS).
    kind: str = "cloud"
    #: Default crawl interval for the daemon, seconds.
    default_interval: int = 3600
    #: Endpoint name -> default URL; `endpoints: {"<name>.<endpoint>": URL}` overrides it.
    endpoints: Mapping[str, str] = field(default_factory=dict)
    #: Credential option -> the environment variable that can also provide it.
    credentials: Mapping[str, str] = field(default_factory=dict)
    #: The source's own options (`sources.<name>.<option>`), name -> type. Credentials are
    #: options too (text); enabled/interval/jitter/timeout/request_interval are common.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: True when the source yields nothing without credentials.
    requires_credentials: bool = False
    #: Shown by `gpuradar sources`.
    notes: str = ""
    #: Minimum seconds between two requests to one host (the provider's documented rate
    #: limit); the option `request_interval` overrides it.
    request_interval: float = 0.0
    #: What links the GPUs of a multi-GPU offer, by instance family (first match wins).
    interconnect: tuple[Family, ...] = ()
    #: Whether a region code is in mainland China; None: the provider has no such region.
    mainland: Callable[[str], bool] | None = None
    #: Its status line (see Describe); None: credentials_status.
    describe: Describe | None = None
    #: Where its prices come from (one of PRICE_SOURCES); stored with each offer
    #: (attributes.price_source) unless the spider says otherwise for an offer.
    price_source: str = "api"
    #: A source that reads a pricing page only in some configurations (Lambda without an API
    #: key): given its options, whether this crawl reads pages. None: `reads_pages`.
    page_mode: Callable[[Options], bool] | None = None
    #: The fewest GPU rows (offers the parser reads) a complete answer holds: fewer means the
    #: page or answer changed, and the crawl fails as not understood instead of closing
    #: the offers it no longer sees. A page source states its own bound.
    min_rows: int = 1
    #: What the provider publishes about how often its spot offers are interrupted, and
    #: whether gpuradar reads it (`gpuradar sources`, and the signal of a spot offer that
    #: carries none); None: the source sells no spot.
    spot_signal: str | None = None

    def __post_init__(self) -> None:
        for name in ("endpoints", "credentials", "options"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")
        if self.price_source not in PRICE_SOURCES:
            raise ValueError(f"{self.name}: price_source {self.price_source!r} is not one of "
                             f"{PRICE_SOURCES}")
        if self.reads_pages != (self.kind == "page"):
            raise ValueError(f"{self.name}: a source reading pages (price_source list_page) "
                             "is of kind 'page', and only such a source")
        if self.reads_pages and self.default_interval < PAGE_MIN_INTERVAL:
            raise ValueError(f"{self.name}: a page source's default interval is at least "
                             f"{PAGE_MIN_INTERVAL} s, not {self.default_interval}")

    @property
    def reads_pages(self) -> bool:
        """Whether its crawl reads a provider's web pages (robots.txt, hourly at most)."""
        return self.price_source == "list_page"

    def reads_pages_with(self, opts: Options) -> bool:
        """Whether a crawl with these options reads web pages, and so obeys the page rules
        (robots.txt, conditional requests)."""
        return self.page_mode(opts) if self.page_mode is not None else self.reads_pages

    @property
    def has_mainland_regions(self) -> bool:
        return self.mainland is not None

    def is_mainland(self, region: str) -> bool:
        """Whether an offer in `region` runs in mainland China (Hong Kong is not)."""
        return self.mainland is not None and self.mainland(region or "")

    def with_env_credentials(self, opts: OptionsT) -> OptionsT:
        """`opts` (the config file's `sources.<name>` section, as the schema checked it) with
        the credentials it leaves out taken from their environment variables."""
        found = {opt: os.environ[env] for opt, env in self.credentials.items()
                 if not opts.get(opt) and os.environ.get(env)}
        return opts.model_copy(update=found) if found else opts

    def status(self, configured: Options, replay_dir: str | os.PathLike[str] | None = None
               ) -> tuple[bool, str]:
        """Whether the source runs with these options (the config file's, as
        Config.source_options gives them) and why: for `gpuradar sources`, `config check`,
        and which sources a crawl or the daemon runs. `replay_dir` is the recording a replay
        answers from (GPURADAR_REPLAY_DIR)."""
        opts = self.with_env_credentials(configured)
        if opts.get("enabled") is False:
            return False, "disabled in the config file"
        if replay_dir and (Path(replay_dir) / self.name / "index.json").exists():
            # A recording answers every request: no provider is asked, no credential needed.
            return True, f"replaying the recording in {replay_dir}"
        return (self.describe or credentials_status)(self, opts, configured)

    def option_types(self) -> dict[str, Any]:
        """The source's own options, name -> type: `options` and the credentials (text)."""
        return dict(self.options) | {opt: str for opt in self.credentials
                                     if opt not in self.options}
