"""Rules and notification targets from the configuration.

Targets are validated when they are loaded (apprise parses every URL), and every place
that shows a target shows its name or apprise's redacted URL, never the secret in it.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from gpuradar.alerts.alert_settings import AlertSettingError, AlertSettings
from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.rules import Rule, RuleError
from gpuradar.core.config import Config, ConfigError, Marks, read_yaml

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MIN_MASKED = 4  # shorter values (a port, `on`) would mask ordinary words
CHANNELS = ("slack", "email", "webhook", "other")


# -- targets -----------------------------------------------------------------------------
def _plugin(url: str):
    import apprise

    return apprise.Apprise.instantiate(url)


def redact(url: str) -> str:
    """apprise's privacy form of `url`; for a URL apprise cannot parse, only its scheme."""
    try:
        plugin = _plugin(url)
    except Exception:  # noqa: BLE001 - an unparsable URL must still be shown safely
        plugin = None
    if plugin is not None:
        return plugin.url(privacy=True)
    scheme = url.split("://", 1)[0] if "://" in url else ""
    return f"{scheme}://<redacted>" if scheme and scheme.isalnum() else "<redacted>"


def channel_of(url: str) -> str:
    """'slack', 'email', 'webhook' or 'other', from the apprise plugin the URL selects."""
    from apprise.plugins.custom_form import NotifyForm
    from apprise.plugins.custom_json import NotifyJSON
    from apprise.plugins.custom_xml import NotifyXML
    from apprise.plugins.email import NotifyEmail
    from apprise.plugins.slack import NotifySlack

    try:
        plugin = _plugin(url)
    except Exception:  # noqa: BLE001
        plugin = None
    if isinstance(plugin, NotifySlack):
        return "slack"
    if isinstance(plugin, NotifyEmail):
        return "email"
    if isinstance(plugin, NotifyJSON | NotifyForm | NotifyXML):
        return "webhook"
    return "other"


@dataclass(frozen=True)
class Target:
    """A named place notifications go to: one or more apprise URLs, plus tags.

    `secrets`: the values `${VAR}` put into its URLs. apprise's privacy form hides a
    password and the tokens it knows of a service, not a token in a webhook's path, so
    whatever came from the environment is masked wherever the target is shown."""

    name: str
    urls: tuple[str, ...]
    tags: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()

    def mask(self, text: str) -> str:
        """`text` (an error, a URL shown) without this target's URLs or anything secret in
        them: each URL as apprise's privacy form, then its tokens and `secrets` as ****."""
        from gpuradar.core.logs import url_secrets

        found = set(self.secrets)
        for url in self.urls:
            text = text.replace(url, redact(url))
            parts = urlsplit(url)
            found |= url_secrets(url) - {url}
            found |= {unquote(p) for p in (parts.password or "", parts.username or "",
                                           parts.query, *parts.path.split("/"))
                      if len(unquote(p)) >= 6}
        for secret in sorted(found, key=len, reverse=True):
            if len(secret) >= MIN_MASKED:
                text = text.replace(secret, "****")
        return text

    @property
    def channel(self) -> str:
        kinds = {channel_of(u) for u in self.urls}
        return kinds.pop() if len(kinds) == 1 else "other"

    def redacted(self) -> str:
        return self.mask(", ".join(redact(u) for u in self.urls))


class Targets(Mapping[str, Target]):
    """Targets by name; `select` resolves what a rule's `notify:` says (names or tags)."""

    def __init__(self, targets: dict[str, Target] | None = None, *,
                 delivery: dict[str, float] | None = None) -> None:
        self._targets = dict(targets or {})
        # max_attempts / retry_backoff / send_timeout from the `alerts:` section
        self.delivery = dict(delivery or {})

    def __getitem__(self, name: str) -> Target:
        return self._targets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def tags(self) -> set[str]:
        return {t for target in self._targets.values() for t in target.tags}

    def select(self, wanted: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """Target names for names-or-tags; every target when `wanted` is empty.

        Raises KeyError naming the entry that is neither a target nor a tag."""
        if not wanted:
            return tuple(self._targets)
        out: list[str] = []
        for item in wanted:
            name = item[4:] if item.startswith("tag:") else item
            if not item.startswith("tag:") and name in self._targets:
                out.append(name)
                continue
            tagged = [n for n, t in self._targets.items() if name in t.tags]
            if not tagged:
                raise KeyError(item)
            out.extend(tagged)
        return tuple(dict.fromkeys(out))


def _expand_env(value: str, target: str, where: str, values: list[str]) -> str:
    """`${VAR}` in a target's URL; `values` gets each value used (the target's secrets)."""
    def sub(m: re.Match) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise ConfigError(f"{where}: target {target!r}: environment variable {var} is not "
                              "set")
        values.append(os.environ[var])
        return os.environ[var]

    return _ENV.sub(sub, value)


def parse_targets(raw: Any, where: str = "config", *, expand: bool = True) -> Targets:
    """`targets:` mapping -> Targets; every URL parsed by apprise now, not at send time.

    A target is an apprise URL, a list of them, or `{url: ..., tags: [...]}`; `${VAR}`
    in a URL is replaced from the environment (keep secrets out of the file) unless
    `expand` is false (a loaded configuration file is expanded already)."""
    if raw is None:
        return Targets()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: `targets` must be a mapping of name: apprise URL")
    out: dict[str, Target] = {}
    for name, spec in raw.items():
        name = str(name)
        tags: list[str] = []
        if isinstance(spec, str):
            urls = [spec]
        elif isinstance(spec, list):
            urls = spec
        elif isinstance(spec, dict):
            unknown = set(spec) - {"url", "urls", "tags", "tag"}
            if unknown:
                raise ConfigError(f"{where}: target {name!r}: unknown key(s) "
                                  f"{', '.join(sorted(map(str, unknown)))}; use url and tags")
            urls = spec.get("urls") or spec.get("url") or []
            urls = [urls] if isinstance(urls, str) else urls
            raw_tags = spec.get("tags", spec.get("tag")) or []
            tags = ([t.strip() for t in raw_tags.split(",")] if isinstance(raw_tags, str)
                    else [str(t).strip() for t in raw_tags])
        else:
            raise ConfigError(f"{where}: target {name!r} must be an apprise URL or a mapping "
                              "with url and tags")
        if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise ConfigError(f"{where}: target {name!r} has no URL")
        out[name] = checked_target(name, urls, tags, where, expand=expand)
    return Targets(out)


def checked_target(name: str, urls: list[str], tags: list[str], where: str, *,
                   expand: bool = True, secrets: list[str] | None = None) -> Target:
    """A Target whose every URL apprise can use; ConfigError naming the target (its URL
    redacted) otherwise. `secrets`: what `${VAR}` already put into the URLs."""
    checked, found = [], list(secrets or ())
    for url in urls:
        url = _expand_env(url.strip(), name, where, found) if expand else url.strip()
        try:
            plugin = _plugin(url)
        except Exception:  # noqa: BLE001
            plugin = None
        if plugin is None:
            shown = Target(name, (url,), secrets=frozenset(found)).redacted()
            raise ConfigError(f"{where}: target {name!r}: apprise cannot use the URL "
                              f"{shown} (unknown scheme or malformed; see the "
                              "apprise wiki for the URL format of each service)")
        checked.append(url)
    return Target(name, tuple(checked), frozenset(t for t in tags if t),
                  frozenset(found))


#: The `alerts:` keys delivery reads (alerts.delivery).
DELIVERY_KEYS = ("max_attempts", "retry_backoff", "send_timeout")


def load_targets(cfg: Config) -> Targets:
    """The configured targets (checked by the schema), each URL checked by apprise;
    ConfigError names the target (secret redacted).

    Carries the delivery settings of the `alerts:` section (max_attempts, retry_backoff,
    send_timeout) for deliver_pending."""
    marks = cfg.located()
    checked = {name: checked_target(name, spec.url_list(), spec.tag_list(),
                                    cfg.where("targets", name), expand=cfg.marks is None,
                                    secrets=marks.values_under(("targets", name)))
               for name, spec in cfg.targets.items()}
    alerts = cfg.alerts
    return Targets(checked, delivery={key: float(getattr(alerts, key)) for key in DELIVERY_KEYS
                                      if key in alerts.model_fields_set})


def load_settings(cfg: Config) -> AlertSettings:
    """The `alerts:` section as AlertSettings; a value alerts cannot read is a ConfigError
    naming its file, line and key."""
    try:
        return AlertSettings(cfg.alerts)
    except AlertSettingError as exc:
        raise cfg.error(("alerts", exc.key), exc.message) from None


# -- rules -------------------------------------------------------------------------------
def parse_rule_entry(entry: Any) -> Rule:
    """One `rules:` entry: a readable string or a mapping."""
    if isinstance(entry, str):
        return parse_rule(entry)
    if isinstance(entry, dict):
        return rule_from_mapping(entry)
    raise RuleError(f"a rule is a string or a mapping, not {type(entry).__name__}")


def read_rules_file(path: Path) -> list[Any]:
    """The `rules:` list of a YAML file (a bare list is accepted too)."""
    if not path.exists():
        raise RuleError(f"rules file {path} does not exist")
    try:  # the config file's reader and limits (size, aliases, depth), without ${VAR}
        data = read_yaml(path, Marks(path=path), expand=False)
    except ConfigError as exc:
        raise RuleError(str(exc)) from None
    if data is None:
        return []
    if isinstance(data, dict):
        unknown = set(data) - {"rules"}
        if unknown or not isinstance(data.get("rules") or [], list):
            raise RuleError(f"{path}: expected a `rules:` list"
                            + (f" (unknown key(s) {', '.join(sorted(map(str, unknown)))})"
                               if unknown else ""))
        return list(data.get("rules") or [])
    if isinstance(data, list):
        return data
    raise RuleError(f"{path}: expected a `rules:` list")


def parse_rules(entries: list[tuple[str, Any]],
                targets: Targets | None = None) -> tuple[list[Rule], list[RuleError]]:
    """Parse (where, entry) pairs; returns the good rules and every error (not just the
    first), with targets resolved when `targets` is given."""
    rules: list[Rule] = []
    errors: list[RuleError] = []
    names: dict[str, str] = {}
    for where, entry in entries:
        try:
            rule = parse_rule_entry(entry)
        except RuleError as exc:
            label = where
            if isinstance(entry, dict) and entry.get("name"):
                label += f" ({entry['name']})"
            errors.append(exc.located(label))
            continue
        explicit = isinstance(entry, dict) and "name" in entry
        if rule.name in names:
            if explicit:
                errors.append(RuleError(f"duplicate rule name {rule.name!r} (also "
                                        f"{names[rule.name]})", where=where))
                continue
            n = 2
            while f"{rule.name}-{n}" in names:
                n += 1
            rule = replace(rule, name=f"{rule.name}-{n}")
        names[rule.name] = where
        if targets is not None:
            try:
                rule = replace(rule, targets=targets.select(rule.notify))
            except KeyError as exc:
                bad = exc.args[0]
                hint = difflib.get_close_matches(bad, [*targets, *targets.tags()], n=1)
                known = ", ".join(sorted(targets)) or "none configured"
                errors.append(RuleError(f"notify: {bad!r} is neither a target nor a tag "
                                        f"(targets: {known})", rule.text, where=where,
                                        hint=hint[0] if hint else None))
                continue
        rules.append(rule)
    return rules, errors


def rule_entries(cfg: Config) -> list[tuple[str, Any]]:
    """(where, entry) for every rule in the config and its rules_file."""
    entries = [(f"{cfg.where('rules', i)}: rules[{i + 1}]", e) for i, e in enumerate(cfg.rules)]
    if cfg.rules_file:
        entries += [(f"{cfg.rules_file}: rule {i + 1}", e)
                    for i, e in enumerate(read_rules_file(cfg.rules_file))]
    return entries


class RuleErrors(RuleError):
    """Several bad rules at once; str() lists them all."""

    def __init__(self, errors: list[RuleError]) -> None:
        self.errors = errors
        ValueError.__init__(self, "\n".join(str(e) for e in errors))
        self.message, self.rule, self.start, self.end = str(self), "", -1, -1
        self.where, self.hint = "", None

    def render(self) -> str:
        return "\n".join(str(e) for e in self.errors)


def load_rules(cfg: Config, targets: Targets | None = None,
               settings: AlertSettings | None = None) -> list[Rule]:
    """Every rule of the config (`rules:` and `rules_file`), targets resolved. `settings`:
    the `alerts:` section as the caller already read it (load_settings), else read here:
    a bad section is refused at load, not per evaluation.

    Raises RuleError (listing every bad rule) or ConfigError (a bad target)."""
    if settings is None:
        load_settings(cfg)
    if targets is None:
        targets = load_targets(cfg)
    rules, errors = parse_rules(rule_entries(cfg), targets)
    if errors:
        raise errors[0] if len(errors) == 1 else RuleErrors(errors)
    return rules
