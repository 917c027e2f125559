"""Notification messages, rendered from Jinja2 templates in alerts/templates/.

Every notification is rendered once, when it is queued, in three forms: Markdown (Slack,
webhooks, chat services; apprise turns it into Slack mrkdwn), HTML (email; apprise adds the
plain-text alternative part) and plain text (services that only take text). Users override
any template by putting a file of the same name in the directory set as `alerts.templates`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

from gpuradar.core.units import age, money

if TYPE_CHECKING:
    from gpuradar.alerts.engine import Market, RuleMatch
    from gpuradar.alerts.rules import Rule

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE_NAMES = ("title.txt.j2", "message.md.j2", "message.txt.j2", "email.html.j2")
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


def offer_summary(match: tuple[float, tuple], rule: Rule, market: Market) -> dict[str, Any]:
    """One matching offer as plain data (stored with the alert, listed in messages)."""
    from gpuradar.alerts import engine as x  # the offer tuple's positions

    value, o = match
    rate = market.usd_per_unit(rule.currency) or 1.0
    if o[x.CUR] == rule.currency:
        per_gpu = o[x.PRICE] / o[x.COUNT] if o[x.COUNT] else None
        instance = o[x.PRICE]
    else:
        per_gpu = None if o[x.PGPU] is None else o[x.PGPU] / rate
        instance = None if o[x.PUSD] is None else o[x.PUSD] / rate
    seen = market.last_success.get(o[x.SRC])
    summary = {"source": o[x.SRC], "region": o[x.REG], "zone": o[x.ZONE],
               "instance_type": o[x.ITYPE], "pricing": o[x.PRICING], "gpu": o[x.GPU],
               "gpu_count": o[x.COUNT], "value": value, "per_gpu": per_gpu,
               "instance": instance, "price": o[x.PRICE], "currency": o[x.CUR],
               "price_usd": o[x.PUSD], "available": o[x.AVAIL],
               "available_count": o[x.ACOUNT],
               "observed_at": seen.isoformat() if seen else None, "url": o[x.URL] or ""}
    fit = x.fit_of(rule, o)
    if fit is not None:  # a fit rule: `value` is the price of this configuration
        summary["configuration"] = {"machines": fit.nodes, "gpus": fit.gpus,
                                    "gpus_needed": fit.gpus_needed, "sharded": fit.sharded,
                                    "per_gpu": bool(rule.fit and rule.fit.per_gpu)}
    return summary


def _display(summary: dict[str, Any], rule_currency: str, now: datetime) -> dict[str, Any]:
    avail = {True: "yes", False: "no", None: "unknown"}[summary["available"]]
    if summary.get("available_count") is not None:
        avail += f" ({summary['available_count']})"
    seen = summary.get("observed_at")
    count = summary["gpu_count"]
    config = summary.get("configuration")
    fit = ""
    if config:  # "$5.38/h for 2 GPUs on 1 machine", "(the job needs 2)" when it uses fewer
        unit = "GPU-h" if config["per_gpu"] else "h"
        machines = config["machines"]
        fit = (f"{money(summary['value'], rule_currency)}/{unit} for {config['gpus']:g} GPUs "
               f"on {machines} machine{'s' if machines != 1 else ''}"
               + (f" (the job needs {config['gpus_needed']})"
                  if config["gpus_needed"] < config["gpus"] else ""))
    return {
        **summary,
        "fit": fit,
        "region": summary["region"] + (f"/{summary['zone']}" if summary.get("zone") else ""),
        "gpus": f"{count:g}x {summary['gpu']}",
        "pricing": summary["pricing"].replace("_", "-"),
        "per_gpu": money(summary["per_gpu"], rule_currency),
        "instance": money(summary["instance"], rule_currency),
        "original": (money(summary["price"], summary["currency"])
                     if summary["currency"] != rule_currency else ""),
        "available": avail,
        "fresh": age(datetime.fromisoformat(seen), now) if seen else "?",
    }


class Renderer:
    """The Jinja2 environment: the user's template directory first, then the built-ins."""

    def __init__(self, user_dir: Path | None = None) -> None:
        loaders = [FileSystemLoader(str(user_dir))] if user_dir else []
        loaders.append(FileSystemLoader(str(TEMPLATES)))
        self.env = Environment(loader=ChoiceLoader(loaders), undefined=StrictUndefined,
                               autoescape=lambda name: bool(name and ".html" in name),
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)

    def render(self, context: dict[str, Any], notify_type: str) -> Message:
        title = self.env.get_template("title.txt.j2").render(**context).strip()
        context = {**context, "title": title}
        return Message(
            title=" ".join(title.split()),
            markdown=self.env.get_template("message.md.j2").render(**context).strip(),
            text=self.env.get_template("message.txt.j2").render(**context).strip(),
            html=self.env.get_template("email.html.j2").render(**context).strip(),
            notify_type=notify_type)

    def rule_message(self, kind: str, match: RuleMatch, market: Market, top: int,
                     previous: float | None = None,
                     resolved_best: float | None = None) -> Message:
        rule = match.rule
        now = market.now
        offers = [_display(offer_summary(m, rule, market), rule.currency, now)
                  for m in match.matches[:top]]
        unit = "h" if rule.per_instance else "GPU-h"
        context = {
            "kind": kind, "rule": {"name": rule.name, "text": rule.text}, "now": now,
            "count": len(match.matches), "offers": offers,
            "more": max(0, len(match.matches) - top),
            "best": money(match.best, rule.currency) if match.best is not None else "",
            "previous": money(previous, rule.currency) if previous is not None else "",
            "limit": money(match.limit, rule.currency) if match.limit is not None else "",
            "reference": (money(match.reference, rule.currency)
                          if match.reference is not None else ""),
            "cheapest_now": (money(resolved_best, rule.currency)
                             if resolved_best is not None else ""),
            "unit": unit, "per_instance": rule.per_instance, "source": None,
        }
        return self.render(context, NOTIFY_TYPES[kind])

    def source_message(self, kind: str, source: str, market: Market) -> Message:
        seen = market.last_success.get(source)
        context = {
            "kind": kind, "rule": {"name": f"source:{source}", "text": f"source {source}"},
            "now": market.now, "count": 0, "offers": [], "more": 0, "best": "",
            "previous": "", "limit": "", "reference": "", "cheapest_now": "", "unit": "h",
            "per_instance": False,
            "source": {"name": source, "failures": market.failures.get(source, 0),
                       "last_success": age(seen, market.now) + " ago" if seen else "never"},
        }
        return self.render(context, NOTIFY_TYPES[kind])

    def test_message(self, target: str) -> Message:
        context = {
            "kind": "test", "rule": {"name": "test", "text": "test"},
            "now": datetime.now(UTC), "count": 0, "offers": [], "more": 0, "best": "",
            "previous": "", "limit": "", "reference": "", "cheapest_now": "", "unit": "h",
            "per_instance": False, "source": None, "target": target,
        }
        return self.render(context, "info")
