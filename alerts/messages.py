"""Notification messages, rendered from Jinja2 templates in alerts/templates/.

Every notification is rendered once, when it is queued, in three forms: Markdown (Slack,
webhooks, chat services; apprise turns it into Slack mrkdwn), HTML (email; apprise derives
the plain-text part of the email from it, so the HTML is laid out as a short list per
offer that reads well as text too) and plain text (services that only take text). Users
override any template by putting a file of the same name in `alerts.templates`.

Every price is written with its unit: `$14.96/h for 8 GPUs` for a whole offer, `$1.87/GPU-h`
per GPU-hour; the rule's own basis comes first. A per-GPU price is never written as `/h`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import CodeType, SimpleNamespace
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, Template
from jinja2.bccache import Bucket, BytecodeCache
from markupsafe import Markup

from gpuradar.alerts.market import Market, Pool, RuleMatch
from gpuradar.alerts.rules import Rule, duration_text
from gpuradar.core.clock import SYSTEM
from gpuradar.core.units import age, money
from gpuradar.storage.offers import OfferRow

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE_NAMES = ("title.txt.j2", "message.md.j2", "message.txt.j2", "email.html.j2")
# One offer as each message form lists it: `o.markdown`, `o.text`, `o.html` in a template.
ITEM_TEMPLATES = {"markdown": "offer.md.j2", "text": "offer.txt.j2", "html": "offer.html.j2"}
NOTIFY_TYPES = {"firing": "warning", "improved": "warning", "repeat": "warning",
                "resolved": "success", "stale": "failure", "recovered": "success",
                "test": "info"}


@dataclass
class Message:
    title: str
    markdown: str
    text: str
    html: str
    notify_type: str = "info"


def offer_summary(value: float, o: OfferRow, rule: Rule, market: Market,
                  pool: Pool | None = None) -> dict[str, Any]:
    """One matching offer as plain data (stored with the alert, listed in messages): its
    price in the rule's currency per GPU-hour and for the whole offer, and `value`, the
    price the rule compared (its unit in `unit`)."""
    cur = rule.condition.currency
    rate = market.usd_per_unit(cur) or 1.0
    whole: float | None
    if o.currency == cur:
        per_gpu = o.price / o.gpu_count if o.gpu_count else None
        whole = o.price
    else:
        per_gpu = None if o.price_per_gpu_usd is None else o.price_per_gpu_usd / rate
        whole = None if o.price_usd is None else o.price_usd / rate
    seen = market.last_success.get(o.source)
    summary: dict[str, Any] = {
        "source": o.source, "region": o.region, "zone": o.zone,
        "instance_type": o.instance_type, "pricing": o.pricing, "gpu": o.gpu,
        "gpu_count": o.gpu_count, "value": value, "unit": rule.unit, "per_gpu": per_gpu,
        "instance": whole, "price": o.price, "currency": o.currency, "price_usd": o.price_usd,
        "available": o.available, "available_count": o.available_count,
        "observed_at": seen.isoformat() if seen else None, "url": o.url or ""}
    fit = pool.fit(o) if pool is not None else None
    if fit is not None:  # a fit rule: `value` is the price of this configuration
        summary["configuration"] = {"machines": fit.nodes, "gpus": fit.gpus,
                                    "gpus_needed": fit.gpus_needed, "sharded": fit.sharded,
                                    "per_gpu": not rule.condition.per_offer}
    return summary


def _gpus(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def _display(summary: dict[str, Any], rule_currency: str, now: datetime) -> dict[str, Any]:
    """An offer summary as the templates show it: `price` in the rule's basis first,
    `other` in the other basis, both with their units."""
    avail = {True: "yes", False: "no", None: "unknown"}[summary["available"]]
    if summary.get("available_count") is not None:
        avail += f" ({summary['available_count']})"
    seen = summary.get("observed_at")
    count = summary["gpu_count"]
    per_gpu = f"{money(summary['per_gpu'], rule_currency)}/GPU-h"
    whole = f"{money(summary['instance'], rule_currency)}/h for {_gpus(count)}"
    config = summary.get("configuration")
    fit = ""
    if config:  # "$5.38/h for 2 GPUs on 1 machine", "(the job needs 2)" when it uses fewer
        unit = "GPU-h" if config["per_gpu"] else "h"
        machines = config["machines"]
        fit = (f"{money(summary['value'], rule_currency)}/{unit} for {_gpus(config['gpus'])} "
               f"on {machines} machine{'s' if machines != 1 else ''}"
               + (f" (the job needs {config['gpus_needed']})"
                  if config["gpus_needed"] < config["gpus"] else ""))
        price, other = fit, (per_gpu if not config["per_gpu"] else whole)
    elif summary.get("unit") == "h":
        price, other = whole, per_gpu
    else:
        price, other = per_gpu, whole
    return {
        **summary,
        "fit": fit,
        "price": price,
        "other": other,
        "region": summary["region"] + (f"/{summary['zone']}" if summary.get("zone") else ""),
        "gpus": f"{count:g}x {summary['gpu']}",
        "pricing": summary["pricing"].replace("_", "-"),
        "original": (money(summary["price"], summary["currency"])
                     if summary["currency"] != rule_currency else ""),
        "available": avail,
        "fresh": age(datetime.fromisoformat(seen), now) if seen else "?",
    }


class ShownOffer(SimpleNamespace):
    """An offer as the templates show it (attributes, so `o.source` is a plain lookup;
    `o["source"]` works too), and its list item in each form (`o.markdown`, `o.text`,
    `o.html`), rendered on first use: one offer is listed in many rules' messages of an
    evaluation (211 distinct offers in 27,000 list items at 10,000 rules), its item is
    rendered once."""

    def __getattr__(self, name: str) -> Any:  # only for what is not set yet: an item
        template = ITEM_TEMPLATES.get(name)
        renderer = self.__dict__.get("renderer_")
        if template is None or renderer is None:
            raise AttributeError(name)
        item = renderer.item(template, self)
        setattr(self, name, item)
        return item


class _CompiledTemplates(BytecodeCache):
    """Each template file compiled once per process, whichever Renderer asks: Jinja compiles
    a template per environment (14 ms for a message template, 30 % of the alert engine's
    tests), and an engine, a `rules test` and each test make their own. Keyed as Jinja keys
    its bytecode caches, by template name and file and by a checksum of the source, so an
    edited template is compiled again. Only Renderer's environment (one set of options)
    uses it: the compiled code depends on those options."""

    def __init__(self) -> None:
        self._code: dict[tuple[str, str], CodeType] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._code.get((bucket.key, bucket.checksum))
        if code is not None:
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is not None:
            self._code[(bucket.key, bucket.checksum)] = bucket.code


_COMPILED = _CompiledTemplates()


class Renderer:
    """The Jinja2 environment: the user's template directory first, then the built-ins."""

    def __init__(self, user_dir: Path | None = None) -> None:
        loaders = [FileSystemLoader(str(user_dir))] if user_dir else []
        loaders.append(FileSystemLoader(str(TEMPLATES)))
        self.env = Environment(loader=ChoiceLoader(loaders), undefined=StrictUndefined,
                               autoescape=lambda name: bool(name and ".html" in name),
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                               bytecode_cache=_COMPILED)
        # One offer is listed in many rules' messages of one evaluation: shown once.
        self._shown: dict[tuple, ShownOffer] = {}
        # The templates, looked up once per evaluation rather than once per message (each
        # lookup checks the file for changes).
        self._templates: list[Template] | None = None
        self._items: dict[str, Template] = {}

    def reset(self) -> None:
        """Forget the offers shown, and look at the template files again (a template edited
        meanwhile is used from then on): call at the start of each evaluation."""
        self._shown.clear()
        self._templates = None
        self._items.clear()

    def _offer(self, value: float, o: OfferRow, rule: Rule, market: Market,
               pool: Pool | None) -> ShownOffer:
        """An offer as the templates show it, kept for the evaluation's other messages."""
        fit = pool is not None and pool.estimate is not None
        key = (id(o), rule.condition.currency, rule.unit, value if fit else None,
               id(pool) if fit else None)
        shown = self._shown.get(key)
        if shown is None:
            shown = self._shown[key] = ShownOffer(**_display(
                offer_summary(value, o, rule, market, pool), rule.condition.currency,
                market.now or SYSTEM.now()), renderer_=self)
        return shown

    def _template(self, name: str) -> Template:
        """The template `name`, its globals (Jinja's `range`, `dict`, ...) as a plain dict:
        Jinja keeps them as a ChainMap over the environment's, which every render copies
        key by key through the Mapping protocol, half the cost of rendering a short
        message. The environment's globals never change here."""
        template = self.env.get_template(name)
        if not isinstance(template.globals, dict):
            template.globals = dict(template.globals)
        return template

    def item(self, name: str, offer: ShownOffer) -> str:
        """One offer's list item from the template `name` (HTML stays unescaped in the
        email it goes into: the item template escaped what it shows)."""
        template = self._items.get(name)
        if template is None:
            template = self._items[name] = self._template(name)
        text = template.render(o=offer)
        return Markup(text) if name.endswith(".html.j2") else text

    def render(self, context: dict[str, Any], notify_type: str) -> Message:
        """The four forms of one message. Their templates share one context: the
        environment's globals merged with `context` once, not once per template as
        `Template.render` does (a message costs four renders)."""
        if self._templates is None:
            self._templates = [self._template(name) for name in TEMPLATE_NAMES]
        title_t, markdown_t, text_t, html_t = self._templates
        shared = {**title_t.globals, **context}
        title = self._render(title_t, shared).strip()
        shared["title"] = title
        return Message(
            title=" ".join(title.split()),
            markdown=self._render(markdown_t, shared).strip(),
            text=self._render(text_t, shared).strip(),
            html=self._render(html_t, shared).strip(),
            notify_type=notify_type)

    def _render(self, template: Template, variables: dict[str, Any]) -> str:
        """`template.render(variables)` without copying them: a template assigns its own
        variables in its context, never in `variables`."""
        context = template.new_context(variables, shared=True)
        try:
            return self.env.concat(template.root_render_func(context))
        except Exception:
            self.env.handle_exception()
            raise  # (handle_exception always raises)

    def rule_message(self, kind: str, match: RuleMatch, market: Market, top: int,
                     previous: float | None = None,
                     resolved_best: float | None = None) -> Message:
        rule = match.rule
        cur = rule.condition.currency
        now = market.now or SYSTEM.now()
        offers = [self._offer(v, o, rule, market, match.pool) for v, o in match.matches[:top]]
        context = {
            "kind": kind, "rule": SimpleNamespace(name=rule.name, text=rule.text,
                                                  reading=rule.reading()),
            "now": now, "count": match.count, "offers": offers,
            "more": max(0, match.count - top),
            "best": money(match.best, cur) if match.best is not None else "",
            "previous": money(previous, cur) if previous is not None else "",
            "limit": money(match.limit, cur) if match.limit is not None else "",
            "reference": money(match.reference, cur) if match.reference is not None else "",
            "reference_name": reference_name(rule),
            "cheapest_now": money(resolved_best, cur) if resolved_best is not None else "",
            "unit": rule.unit, "per_instance": rule.condition.per_offer, "source": None,
        }
        if rule.condition.index:  # alerts.index_rules: the figures, not offers
            context["index"] = [SimpleNamespace(
                gpu=f["gpu"], pricing=f["pricing"].replace("_", "-"),
                median=money(v, cur), p10=money(f["p10"] / (f["median"] / v), cur)
                if f["median"] else "", p90=money(f["p90"] / (f["median"] / v), cur)
                if f["median"] else "", offers=f["offers"], providers=f["providers"],
                thin=f.get("status") == "thin",
                reference=money(f["reference"], cur) if f.get("reference") else "")
                for v, f in getattr(match, "figures", [])[:top]]
        return self.render(context, NOTIFY_TYPES[kind])

    def source_message(self, kind: str, source: str, market: Market) -> Message:
        seen = market.last_success.get(source)
        now = market.now or SYSTEM.now()
        context = {
            "kind": kind, "rule": SimpleNamespace(name=f"source:{source}",
                                                  text=f"source {source}", reading=""),
            "now": now, "count": 0, "offers": [], "more": 0, "best": "",
            "previous": "", "limit": "", "reference": "", "reference_name": "",
            "cheapest_now": "", "unit": "h",
            "per_instance": False,
            "source": SimpleNamespace(name=source, failures=market.failures.get(source, 0),
                                      last_success=age(seen, now) + " ago" if seen
                                      else "never"),
        }
        return self.render(context, NOTIFY_TYPES[kind])

    def test_message(self, target: str) -> Message:
        context = {
            "kind": "test", "rule": SimpleNamespace(name="test", text="test", reading=""),
            "now": SYSTEM.now(), "count": 0, "offers": [], "more": 0, "best": "",
            "previous": "", "limit": "", "reference": "", "reference_name": "",
            "cheapest_now": "", "unit": "h",
            "per_instance": False, "source": None, "target": target,
        }
        return self.render(context, "info")


def reference_name(rule: Rule) -> str:
    """What a rule's reference price is, in words: 'the earlier low' (a drop rule), 'the
    30-day median' (a median rule), '' (none)."""
    c = rule.condition
    if c.median_window is not None:
        return f"the {duration_text(c.median_window)} median"
    return "the earlier low" if c.drop_window is not None and not c.index else ""


def email_text(html: str) -> str:
    """The plain-text part apprise puts beside an HTML email (its own HTML-to-text
    conversion), for previews."""
    from apprise import NotifyFormat
    from apprise.conversion import convert_between

    return convert_between(NotifyFormat.HTML, NotifyFormat.TEXT, html)
