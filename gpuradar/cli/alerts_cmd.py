"""`gpuradar rules check|test`, `gpuradar alerts`, `gpuradar notify test`."""


from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from gpuradar.cli.common import (
    EXIT_DATABASE,
    EXIT_FAILED,
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    WideOpt,
    fail,
    get_config,
    get_engine,
    is_file,
    pick_format,
)
from gpuradar.cli.output import Format, age, console, dump_json, emit, err_console, money
from gpuradar.core.clock import SYSTEM

if TYPE_CHECKING:
    from gpuradar.core.config import Config

rules_app = typer.Typer(help="Check alert rules and see what they would match now.",
                        no_args_is_help=True)
notify_app = typer.Typer(help="Notification targets.", no_args_is_help=True)


def _targets(cfg: "Config"):
    from gpuradar.alerts.loader import load_targets
    from gpuradar.core.config import ConfigError

    try:
        return load_targets(cfg)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def _print_errors(errors: list) -> None:
    for exc in errors:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)


def _load(cfg: "Config", source: Path | None, *, strict_targets: bool = True):
    """(rules, errors) from a rules file, or from the configuration."""
    from gpuradar.alerts.loader import parse_rules, read_rules_file, rule_entries
    from gpuradar.alerts.rules import RuleError

    targets = _targets(cfg) if strict_targets else None
    try:
        if source is not None:
            entries = [(f"{source}: rule {i + 1}", e)
                       for i, e in enumerate(read_rules_file(source))]
        else:
            entries = rule_entries(cfg)
    except RuleError as exc:
        return [], [exc]
    return parse_rules(entries, targets)


def _short(d) -> str:
    """timedelta -> '12h', '30m', '1d12h'."""
    seconds, out = int(d.total_seconds()), ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out or "0s"


def _options(rule) -> str:
    parts = []
    if rule.for_count and rule.for_count > 1:
        parts.append(f"for {rule.for_count}")
    if rule.for_duration:
        parts.append(f"for {_short(rule.for_duration)}")
    if rule.repeat_set:
        parts.append(f"repeat {_short(rule.repeat) if rule.repeat else 'never'}")
    if rule.min_drop_pct is not None:
        parts.append(f"min_drop {rule.min_drop_pct * 100:g}%")
    if rule.min_drop_abs is not None:
        parts.append(f"min_drop {rule.min_drop_abs:g}")
    if rule.send_resolved is not None:
        parts.append(f"send_resolved {str(rule.send_resolved).lower()}")
    if rule.top:
        parts.append(f"top {rule.top}")
    if rule.mute_until:
        parts.append(f"muted until {rule.mute_until:%Y-%m-%d %H:%M}")
    return ", ".join(parts)


@rules_app.command("check")
def rules_check(
    file: Annotated[Path | None, typer.Argument(help="A rules file (YAML with a `rules:` "
                                                "list); default: the configured rules.")] = None,
    config: ConfigOpt = None, fmt: FormatOpt = Format.table, as_json: JsonOpt = False,
    as_csv: CsvOpt = False, wide: WideOpt = False,
) -> None:
    """Validate rules (and the targets they notify) and say how each was read; exit 1 when
    any is wrong."""
    from gpuradar.alerts.alert_settings import parse_settings
    from gpuradar.core.config import ConfigError

    if file is not None and not is_file(file, "exists"):
        hint = " (to read one rule: gpuradar rules test 'RULE')" if " " in str(file) else ""
        raise fail(f"rules file {file} does not exist{hint}")
    cfg = get_config(config, check=True, rules=False)  # all `run` checks; rules: below
    try:
        parse_settings(cfg.alerts)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    rules, errors = _load(cfg, file)
    if errors:
        _print_errors(errors)
        err_console.print(f"{len(errors)} bad rule{'s' if len(errors) != 1 else ''}, "
                          f"{len(rules)} good")
        raise typer.Exit(EXIT_FAILED)
    f = pick_format(fmt, as_json, as_csv)
    if f is Format.table and not rules:  # not an empty table and "0 rules OK"
        console.print(f"no rules in {file}" if file else "no rules configured: add them "
                      "under `rules:` (or `rules_file:`) in the config file, or check a file "
                      "(`gpuradar rules check rules.yaml`)", highlight=False,
                      soft_wrap=True)  # one line: a path in it stays whole
        return
    rows = [{"name": r.name, "rule": r.text, "read_as": r.reading(),
             "notify": ", ".join(r.targets or ()) or "-", "options": _options(r)}
            for r in rules]
    emit(rows, [("name", "name"), ("rule", "rule"), ("read_as", "read as"),
                ("notify", "targets", 1), ("options", "options", 2)], f)
    if f is Format.table:
        console.print(f"{len(rules)} rule{'s' if len(rules) != 1 else ''} OK")


def _rules_to_test(cfg: "Config", rule: str | None) -> list:
    """The rules `rules test` and `notify preview` look at: one given as text, a rules
    file, a configured rule by name, or every configured rule."""
    from gpuradar.alerts.loader import parse_rule_entry
    from gpuradar.alerts.rules import RuleError

    if rule and is_file(Path(rule)):
        rules, errors = _load(cfg, Path(rule), strict_targets=False)
    elif rule:
        configured, _ = _load(cfg, None, strict_targets=False)
        named = [r for r in configured if r.name == rule]
        if named:
            return named
        try:
            rules, errors = [parse_rule_entry(rule)], []
        except RuleError as exc:
            raise fail(str(exc)) from None
    else:
        rules, errors = _load(cfg, None, strict_targets=False)
    if errors:
        _print_errors(errors)
        raise typer.Exit(EXIT_FAILED)
    if not rules:
        raise fail("no rules: give one (`gpuradar rules test 'H100 under $2/h'`) or configure "
                   "`rules:`")
    return rules


def _matches(cfg: "Config", rules: list):
    """(settings, market, matches) against the stored offers; database trouble is one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from gpuradar.alerts.alert_settings import parse_settings
    from gpuradar.alerts.engine import match_rules, read_market
    from gpuradar.alerts.market import needs_signals
    from gpuradar.core.config import ConfigError

    try:
        settings = parse_settings(cfg.alerts)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    engine = get_engine(cfg, existing=True)
    now = SYSTEM.now()
    try:
        market = read_market(engine, now, settings, needs_signals(rules))
        matches = match_rules(engine, rules, now=now, alert_settings=settings, market=market)
    except SQLAlchemyError as exc:
        raise fail(f"cannot read the database: {str(exc).splitlines()[0]}",
                   EXIT_DATABASE) from None
    return settings, market, matches, engine


@rules_app.command("test")
def rules_test(
    rule: Annotated[str | None, typer.Argument(help="A rule (`H100 under $2/h`), a configured "
                                               "rule's name or a rules file; default: the "
                                               "configured rules.")] = None,
    top: Annotated[int, typer.Option(help="Offers to list per rule.")] = 5,
    render: Annotated[bool, typer.Option("--render", help="Also show the notification each "
                                         "rule would send now, in all its forms.")] = False,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
) -> None:
    """What each rule would match and fire on now, against the stored offers, and how it was
    read (sends nothing, changes nothing)."""
    from gpuradar.alerts.messages import offer_summary, reference_name
    from gpuradar.storage.alert_store import load_states

    cfg = get_config(config, database_url)
    rules = _rules_to_test(cfg, rule)
    settings, market, matches, engine = _matches(cfg, rules)
    states = load_states(engine)
    f = pick_format(fmt, as_json, as_csv)
    out = []
    for m in matches:
        r = m.rule
        st = states.get(r.key) or {}
        offers = [offer_summary(v, o, r, market, m.pool) for v, o in m.matches[:top]]
        out.append({"name": r.name, "rule": r.text, "read_as": r.reading(),
                    "would_fire": m.matched, "matches": m.count, "best": m.best,
                    "currency": r.condition.currency, "unit": r.unit, "limit": m.limit,
                    "reference_low": m.reference, "reference_name": reference_name(r),
                    "note": m.note, "error": m.error,
                    "stored_state": st.get("state", "inactive"), "offers": offers})
        if r.condition.index:  # a rule on the market index: the figures it matches
            out[-1]["index"] = [{**f, "value": v} for v, f in getattr(m, "figures", [])[:top]]
    if f is Format.json:
        dump_json(out)
        return
    if f is Format.csv:
        emit([], [], f, raw_rows=[{k: v for k, v in o.items() if k != "offers"} for o in out])
        return
    for o, m in zip(out, matches, strict=True):
        unit = o["unit"]
        if o["error"]:
            head = f"[red]cannot be evaluated[/red]: {escape(o['error'].splitlines()[0])}"
        elif o["would_fire"] and "index" in o:
            head = (f"[bold green]would fire[/bold green]: index "
                    f"{money(o['best'], o['currency'])}/{unit} ("
                    + ", ".join(f"{x['gpu']} {x['pricing'].replace('_', '-')} "
                                f"{money(x['value'], o['currency'])}" for x in o["index"]) + ")")
        elif o["would_fire"]:
            head = (f"[bold green]would fire[/bold green]: {o['matches']} offer"
                    f"{'s' if o['matches'] != 1 else ''} from {money(o['best'], o['currency'])}"
                    f"/{unit}")
        else:
            head = "[dim]no match[/dim]" + (f" ({o['note']})" if o["note"] else "")
        if o["reference_low"] is not None:
            head += (f"; {reference_name(m.rule).removeprefix('the ')} "
                     f"{money(o['reference_low'], o['currency'])}/{unit}, limit "
                     f"{money(o['limit'], o['currency'])}/{unit}")
        console.print(f"[bold]{escape(o['name'])}[/bold]  {escape(o['rule'])}\n"
                      f"  read as: {escape(o['read_as'])}\n  {head}; stored state: "
                      f"{o['stored_state']}", highlight=False)
        if o["offers"]:
            rows = [{"source": x["source"], "region": x["region"], "instance": x["instance_type"],
                     "pricing": x["pricing"].replace("_", "-"),
                     "gpus": f"{x['gpu_count']:g}x {x['gpu']}",
                     "per_gpu": money(x["per_gpu"], o["currency"]),
                     "instance_price": money(x["instance"], o["currency"]),
                     "quoted": (money(x["price"], x["currency"])
                                if x["currency"] != o["currency"] else ""),
                     "available": {True: "yes", False: "no", None: "?"}[x["available"]]}
                    for x in o["offers"]]
            # (key, header, priority), as in `prices`: in a narrow terminal the highest
            # priority goes first
            emit(rows, [("source", "source"), ("region", "region", 1),
                        ("instance", "instance"), ("pricing", "pricing"), ("gpus", "GPUs"),
                        ("per_gpu", "per GPU-h"), ("instance_price", "whole offer /h"),
                        ("quoted", "quoted", 3), ("available", "avail", 2)], Format.table,
                 prefixes={"instance": "Standard_"})
        if render:
            _print_rendered(m, market, settings, top)
    if market.stale:
        err_console.print(f"stale sources (ignored): {', '.join(sorted(market.stale))}")
    if any(o["error"] for o in out):
        raise typer.Exit(EXIT_FAILED)


def _print_rendered(m: Any, market: Any, settings: Any, top: int) -> None:
    """The notification a rule would send now, in every form: its title, the Markdown for
    Slack and webhooks, the plain text, the email's HTML and the plain-text part apprise
    derives from it."""
    from gpuradar.alerts.market import band_best
    from gpuradar.alerts.messages import Renderer, email_text

    if m.error:
        return
    kind = "firing" if m.matched else "resolved"
    try:
        msg = Renderer(settings.templates).rule_message(
            kind, m, market, top,
            resolved_best=None if kind != "resolved" else getattr(m, "lowest", None)
            if m.rule.condition.index else band_best(m.rule, market))
    except Exception as exc:  # noqa: BLE001 - a user's template may be broken
        err_console.print(f"[red]error:[/red] cannot render {m.rule.name!r}: "
                          f"{type(exc).__name__}: {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_FAILED) from None
    note = "" if m.matched else " (nothing matches now: this is what resolving would send)"
    for label, body in (("title", msg.title), ("Markdown (Slack, webhooks)", msg.markdown),
                        ("plain text", msg.text), ("email HTML", msg.html),
                        ("email plain-text part", email_text(msg.html))):
        console.rule(f"{label}{note if label == 'title' else ''}")
        console.print(body, markup=False, highlight=False, soft_wrap=True)
    console.rule()


def alerts_command(
    all_alerts: Annotated[bool, typer.Option("--all", help="Also inactive/resolved "
                                             "alerts.")] = False,
    limit: Annotated[int, typer.Option(help="Notifications to list.", min=0)] = 20,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
) -> None:
    """Firing alerts and the notification log (delivery status per target)."""
    from gpuradar.storage.alert_store import alert_rows, notification_log

    cfg = get_config(config, database_url)
    engine = get_engine(cfg, existing=True)
    now = SYSTEM.now()
    alerts = alert_rows(engine, include_inactive=all_alerts)
    log = notification_log(engine, limit=limit)
    f = pick_format(fmt, as_json, as_csv)
    if f is Format.json:
        dump_json({"alerts": alerts, "notifications": log})
        return
    if f is Format.csv:
        emit([], [], f, raw_rows=alerts)
        return
    rows = []
    for a in alerts:
        since = (a["fired_at"] if a["state"] == "firing" else a["updated_at"]
                 if a["state"] == "error" else (a["pending_since"] or a["resolved_at"]))
        best = a.get("best") or {}
        failing = a["state"] == "error"
        rows.append({
            "name": a["name"] if a["kind"] == "rule" else f"source {a['name']}",
            "state": a["state"] + (" (stale)" if a["kind"] == "source" else ""),
            "since": f"{age(since, now)} ago" if since else "-",
            "best": (money(a["best_value"], a["currency"])
                     + (f"/{best['unit']}" if best.get("unit") else "")
                     if a["best_value"] is not None and not failing else "-"),
            "matches": a["match_count"] if a["kind"] == "rule" else "-",
            "where": (str(best.get("error", "")) if failing
                      else f"{best.get('source')} {best.get('region')}" if best else "-"),
            "notified": f"{age(a['last_notified_at'], now)} ago" if a["last_notified_at"]
            else "never",
            "rule": a["description"],
        })
    if rows:
        emit(rows, [("name", "alert"), ("state", "state"), ("since", "since", 1),
                    ("best", "best"), ("matches", "offers", 2),
                    ("where", "cheapest at / error"), ("notified", "notified", 3),
                    ("rule", "rule", 4)], Format.table,
             title="alerts")
    else:
        console.print("no alert has fired yet" if all_alerts else
                      "no alert is firing (--all shows resolved ones)", highlight=False)
    if log:
        nrows = [{"when": f"{age(n['created_at'], now)} ago", "alert": n["alert_key"],
                  "kind": n["kind"], "target": n["target"], "channel": n["channel"] or "-",
                  "status": n["status"], "attempts": n["attempts"],
                  "next": (f"in {age(now, n['next_attempt_at'])}"
                           if n["status"] == "pending" and n["next_attempt_at"] > now else "-"),
                  "error": n["last_error"] or "-"} for n in log]
        emit(nrows, [("when", "queued", 1), ("alert", "alert"), ("kind", "kind"),
                     ("target", "target"), ("channel", "channel", 4), ("status", "status"),
                     ("attempts", "tries", 3), ("next", "next try", 2),
                     ("error", "last error")],
             Format.table, title="notifications")
    else:
        console.print("no notifications yet")


@notify_app.command("test")
def notify_test(
    targets: Annotated[list[str] | None, typer.Argument(help="Target names (default: all "
                                                        "targets).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per target.")] = 30.0,
    config: ConfigOpt = None, fmt: FormatOpt = Format.table, as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """Send a test message to targets now and report apprise's result for each URL."""
    import difflib

    from gpuradar.alerts.alert_settings import parse_settings
    from gpuradar.alerts.delivery import send
    from gpuradar.alerts.loader import channel_of
    from gpuradar.alerts.messages import Renderer
    from gpuradar.core.config import ConfigError

    cfg = get_config(config)
    configured = _targets(cfg)
    if not configured:
        raise fail("no targets configured (add `targets: {name: apprise URL}` to the config)")
    names = targets or list(configured)
    for name in names:
        if name not in configured:
            hint = difflib.get_close_matches(name, list(configured), n=1)
            raise fail(f"unknown target {name!r}" + (f"; did you mean {hint[0]}?" if hint
                                                     else f" (targets: {', '.join(configured)})"))
    try:
        renderer = Renderer(parse_settings(cfg.alerts).templates)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    rows: list[dict[str, Any]] = []
    for name in names:
        target = configured[name]
        msg = renderer.test_message(name)
        outcome = send(target, msg.title, msg.markdown, msg.html, msg.text, "info", timeout)
        for (shown, ok, why), url in zip(outcome.details or [], target.urls, strict=False):
            rows.append({"target": name, "channel": channel_of(url), "url": shown,
                         "result": "sent" if ok else "FAILED", "error": why or ""})
    emit(rows, [("target", "target"), ("channel", "channel"), ("url", "url"),
                ("result", "result"), ("error", "error")], pick_format(fmt, as_json, as_csv))
    if any(r["result"] != "sent" for r in rows):
        raise typer.Exit(EXIT_FAILED)


@notify_app.command("preview")
def notify_preview(
    rule: Annotated[str, typer.Argument(help="A configured rule's name, or a rule "
                                        "(`H100 under $2/h`).")],
    top: Annotated[int | None, typer.Option(help="Offers to list (default: the rule's "
                                            "`top`).")] = None,
    config: ConfigOpt = None, database_url: DbOpt = None,
) -> None:
    """Show the notification a rule would send now, without sending it: title, Markdown
    (Slack, webhooks), plain text, and the email (HTML and its plain-text part)."""
    cfg = get_config(config, database_url)
    rules = _rules_to_test(cfg, rule)
    settings, market, matches, _ = _matches(cfg, rules)
    for m in matches:
        if m.error:
            raise fail(f"rule {m.rule.name!r} cannot be evaluated: "
                       f"{m.error.splitlines()[0]}", EXIT_FAILED)
        _print_rendered(m, market, settings, top or m.rule.top or settings.top)


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules")
    app.add_typer(notify_app, name="notify")
    app.command("alerts")(alerts_command)
