"""The read-only web page at `/` of the web port (served by scheduler/server.py).

Server-rendered HTML that needs no JavaScript: the cheapest live offer per GPU (filtered by
GPU, pricing, region and source through query parameters), each source's freshness and
health, the alerts firing now, the market index's median per model and a price-history chart
for every listed GPU with spot and on-demand apart (or a note saying why a GPU has none),
drawn as inline SVG over a range chosen by link (`?range=24h|7d|30d|90d|365d|all`), and for
a GPU picked in the form, its weekly profile per region (docs/patterns.md). A meta refresh
reloads it; CSS alone fits it to a phone. The CSS is inline too: the page makes no request
anywhere. Nothing changes state over HTTP: every method but GET and HEAD is answered 405.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment
from sqlalchemy import Engine

from gpuradar.core.clock import SYSTEM
from gpuradar.core.outcome import CrawlStatus
from gpuradar.core.pricing import PRICINGS, SPOT, parse_pricing
from gpuradar.core.pricing import label as pricing_label
from gpuradar.core.spot import offer_signal
from gpuradar.core.units import age, money
from gpuradar.scheduler.http_api import DATABASE_ERRORS, first_line

log = logging.getLogger("gpuradar.web")

# PAD_R: room for the newest price's dot (r 3.5) at the right end, whole on any screen
CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 420, 200, 60, 16, 24, 30

#: The history ranges a visitor can pick (`?range=`): label, length, slices drawn (a slice
#: is 15 min, 1 h, 6 h, 18 h, 3 d: fine enough for a step line, few enough to read fast);
#: `all` reaches back to the oldest stored offer (replayed captures are months old).
RANGES = {"24h": ("24 hours", timedelta(hours=24), 96),
          "7d": ("7 days", timedelta(days=7), 168),
          "30d": ("30 days", timedelta(days=30), 120),
          "90d": ("90 days", timedelta(days=90), 120),
          "365d": ("365 days", timedelta(days=365), 122),
          "all": ("all the data", None, 120)}
DEFAULT_RANGE = "7d"
#: The page reloads itself this often (a meta refresh: no JavaScript). Crawls run every few
#: minutes at the most (the shortest default interval is 10 min), so 5 min shows each one
#: soon without reloading for nothing.
REFRESH_SECONDS = 300

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:90em;padding:0 1em;
color:#1d232a}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%}th,td{padding:.25em .5em;text-align:left;
border-bottom:1px solid #e3e6ea;white-space:nowrap;vertical-align:top}th{background:#f4f6f8}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.text{white-space:normal;min-width:14em}td.inst{white-space:normal;min-width:9em}
td.gpu{white-space:normal}
.signal{font-size:.85em;white-space:normal}
form{display:flex;gap:.8em;flex-wrap:wrap;align-items:end;background:#f4f6f8;
padding:.6em .8em;border-radius:6px}label{display:flex;flex-direction:column;font-size:.85em}
input{max-width:11em}
.ok{color:#1a7f37}.bad{color:#b42318}.warn{color:#9a6700}.muted{color:#667085}
nav.range a,nav.range strong{display:inline-block;padding:.1em .5em;border-radius:4px}
nav.range strong{background:#1d232a;color:#fff}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,26em),1fr));
gap:1.2em}figure{margin:0;min-width:0}figcaption{font-weight:600}
svg.chart{display:block;width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#475467}svg .line{fill:none;stroke-width:2}
svg .axis{stroke:#98a2b3}svg .grid{stroke:#eaecf0}
.on-demand{stroke:#2563eb;fill:#2563eb}.spot{stroke:#c2410c;fill:#c2410c}
.capacity-block,.flex-start,.calendar{stroke:#15803d;fill:#15803d}
svg .line.capacity-block,svg .line.flex-start,svg .line.calendar{stroke-dasharray:1 3}
svg .line.spot{stroke-dasharray:5 3}
svg .hour{fill:#cbd5e1}svg .hour.cheapest{fill:#c2410c}
.legend{display:flex;flex-wrap:wrap;gap:0 1em;font-size:.9em}
.key::before{content:"";display:inline-block;width:1.4em;margin-right:.3em;
vertical-align:middle;border-top:2px solid}
.key.capacity-block::before,.key.flex-start::before,.key.calendar::before{border:0;
border-top:2px dotted #15803d}
.key.on-demand::before{border-color:#2563eb}.key.spot::before{border:0;
border-top:2px dashed #c2410c}
.narrow{display:none}
.sub{font-size:.85em;color:#667085;white-space:normal}
@media (max-width:640px){
body{margin:.8em auto;padding:0 .6em;font-size:13px}th,td{padding:.25em .35em}
td{white-space:normal;overflow-wrap:anywhere}td.num,td.keep{white-space:nowrap;
overflow-wrap:normal}td.text{min-width:0}
.lo{display:none}.narrow{display:block}
}
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuradar</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="{{ refresh }}">
<style>{{ css }}</style></head><body>
<h1>gpuradar</h1>
<p class="muted">Cheapest GPU offers, read from this service's database at
{{ now }} UTC; the page reloads itself every {{ refresh_text }}. Read-only; also
<a href="/metrics">/metrics</a>, <a href="/healthz">/healthz</a> and the JSON API
(<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>).</p>
<form method="get" action="/">
 <label>GPU <input name="gpu" value="{{ q.gpu }}" list="gpus" placeholder="H100"></label>
 <datalist id="gpus">{% for g in gpus %}<option value="{{ g }}">{% endfor %}</datalist>
 <label>pricing <select name="pricing">
  {% for value, text in pricing_choices %}
  <option value="{{ value }}"{% if q.pricing == value %} selected{% endif %}>{{ text }}</option>
  {% endfor %}</select></label>
 <label>region <input name="region" value="{{ q.region }}" placeholder="us-* or mainland">
 </label>
 <label>source <select name="source"><option value="">any</option>
  {% for s in source_names %}<option{% if q.source == s %} selected{% endif %}>{{ s }}</option>
  {% endfor %}</select></label>
 <input type="hidden" name="range" value="{{ range_key }}">
 <button type="submit">Filter</button> <a href="/">clear</a>
</form>
<nav class="range" id="range">History over
{% for r in ranges %}{% if r.current %}<strong aria-current="page">{{ r.label }}</strong>
{% else %}<a href="{{ r.href }}">{{ r.label }}</a>{% endif %}{% endfor %}</nav>
{% if problem %}<p class="bad">{{ problem }}</p>{% endif %}

<h2>Cheapest offer per GPU</h2>
{% if replayed %}<p class="warn" id="replayed">Replayed from recordings, not live: {{ replayed }}.
Their prices are as of the capture date.</p>{% endif %}
{% if cheapest %}
<p class="muted narrow">Narrow screen: each GPU's count, source, instance and when it was
seen are under its name; memory, region and availability need a wider screen.</p>
<div class="scroll"><table id="cheapest"><thead><tr><th>GPU</th><th class="num lo">GPUs</th>
<th class="num">$/GPU-h</th><th class="num">$/h</th><th>pricing</th><th class="lo">source</th>
<th class="lo">instance</th><th class="lo">region</th><th class="num lo">memory/GPU</th>
<th class="lo">available</th><th class="lo">seen</th></tr></thead><tbody>
{% for o in cheapest %}<tr><td class="gpu">{{ o.gpu }}<div class="narrow sub">{{ o.count }}x,
{{ o.source }} {{ o.instance }}, {{ o.seen }}</div></td><td class="num lo">{{ o.count }}</td>
<td class="num">{{ o.per_gpu }}</td><td class="num">{{ o.per_hour }}</td>
<td class="pricing">{{ o.pricing }}{% if o.signal %}<br>
<span class="muted signal">{{ o.signal }}</span>{% endif %}{% if o.bands %}<br>
<span class="muted signal bands">{{ o.bands }}</span>{% endif %}</td>
<td class="lo">{{ o.source }}</td>
<td class="inst lo">{{ o.instance }}</td>
<td class="inst lo">{{ o.region }}</td><td class="num lo">{{ o.memory }}</td>
<td class="lo">{{ o.available }}</td><td class="inst lo">{{ o.seen }}</td></tr>
{% endfor %}</tbody></table></div>
{% else %}<p class="muted">{{ empty }}</p>{% endif %}

<h2>Alerts firing</h2>
{% if alerts %}
<div class="scroll"><table id="alerts"><thead><tr><th>rule</th><th class="num">best</th>
<th class="num">matches</th><th>condition</th><th>since (UTC)</th></tr></thead><tbody>
{% for a in alerts %}<tr><td>{{ a.name }}</td><td class="num">{{ a.best }}</td>
<td class="num">{{ a.matches }}</td><td class="text">{{ a.description }}</td>
<td>{{ a.since }}</td></tr>{% endfor %}</tbody></table></div>
{% else %}<p class="muted">No alert is firing.</p>{% endif %}

<h2>Sources</h2>
{% if sources %}
<div class="scroll"><table id="sources"><thead><tr><th>source</th><th>last crawl</th>
<th class="num">offers</th><th class="num lo">failures since</th><th class="lo">last success</th>
<th>data as of</th><th>stale alert</th>{% if source_errors %}<th>error</th>{% endif %}</tr>
</thead><tbody>
{% for s in sources %}<tr><td>{{ s.source }}</td>
<td class="{{ s.css }}">{{ s.status }}, {{ s.last_crawl }} ago</td>
<td class="num">{{ s.offers }}</td><td class="num lo">{{ s.failures }}</td>
<td class="lo">{{ s.last_success }}</td><td>{{ s.data_as_of }}</td>
<td class="{{ 'warn' if s.stale != '-' else 'muted' }}">{{ s.stale }}</td>
{% if source_errors %}<td class="text">{{ s.error }}</td>{% endif %}</tr>{% endfor %}
</tbody></table></div>
{% else %}<p class="muted">No crawl has run yet.</p>{% endif %}

<h2>Market index, last {{ range_label }} (median per GPU-hour)</h2>
<p class="muted">One vote per provider (its cheapest fresh, available offer), outliers
screened; thin: fewer than 3 providers, not the market
(<a href="/api/v1/openapi.json">/api/v1/index</a> has each point's panel and excluded votes).
{% if index_hidden %}Charted: the {{ index|length }} models with the most offers; the API has
{{ index_hidden }} more.{% endif %}</p>
<div class="charts" id="index">{% for c in index %}
<figure><figcaption>{{ c.title }}</figcaption>{{ c.svg }}
<div class="muted">{{ c.detail }}</div></figure>{% else %}
<p class="muted">No index yet: it is computed after each crawl.</p>{% endfor %}</div>

<h2>Price history, last {{ range_label }} (cheapest per GPU-hour)</h2>
<p class="muted">One chart per GPU in the table above; spot and on-demand are separate lines
(spot dashed), each the cheapest offer of its kind at each moment; a price holds from its
observation (a replay's capture) until the next observation of its offer says otherwise.</p>
<div class="charts" id="history">{% for c in charts %}
<figure data-gpu="{{ c.gpu }}"><figcaption>{{ c.gpu }}</figcaption>
<div class="legend">{% for k in c.legend %}<span class="key {{ k.css }}"
title="lowest and highest of the cheapest {{ k.label }} price, last {{ range_label }}">
{{ k.label }} {{ k.low }}{% if k.high != k.low %}–{{ k.high }}{% endif %}</span>
{% endfor %}</div>{{ c.svg }}</figure>
{% endfor %}</div>
{% if uncharted %}<p id="uncharted-why">No chart for {{ uncharted_count }} of
{{ listed }} GPUs in the table: no price of theirs falls in the last
{{ range_label }}{% if longer %} (<a href="{{ longer }}">all the data</a> has them){% endif %}.</p>
<ul id="uncharted">{% for u in uncharted %}<li>{{ u.why }}: {% for g in u.gpus %}<span
class="gpu">{{ g }}</span>{% if not loop.last %}, {% endif %}{% endfor %}</li>
{% endfor %}</ul>
{% elif not charts %}<p class="muted">No history yet.</p>{% endif %}

<h2>Cheapest hours of the week, last {{ pattern_days }} days</h2>
{% if weekly is none %}<p class="muted" id="weekly-none">Pick a GPU above to see, per
pricing and region, the mean price of each hour of the week (UTC), its cheapest hours and
how many weeks they rest on (<a href="/api/v1/openapi.json">/api/v1/patterns</a>;
docs/patterns.md).</p>{% else %}
<p class="muted">{{ weekly_pricing }}: the mean hourly price of each hour of the week, Monday
00:00 UTC on the left; the cheapest hours darker. Volatility: the standard deviation of the
daily change of the midnight price.</p>
<div class="charts" id="weekly">{% for w in weekly %}
<figure data-gpu="{{ w.gpu }}" data-region="{{ w.region }}"><figcaption>{{ w.title }}</figcaption>
{% if w.svg %}{{ w.svg }}{% endif %}<div class="muted">{{ w.detail }}</div></figure>
{% else %}<p class="muted">No history of these offers in the last {{ pattern_days }} days.</p>
{% endfor %}</div>{% endif %}
</body></html>
"""

_ENV = Environment(autoescape=True)
_TEMPLATE = _ENV.from_string(PAGE)
PRICING_LABEL = {kind: pricing_label(kind) for kind in PRICINGS}
# The page's pricing menu: any, then every kind (gpuradar.core.pricing).
PRICING_CHOICES = [("", "any")] + [(label, label) for label in PRICING_LABEL.values()]


def _one(query: dict[str, list[str]], key: str) -> str:
    return (query.get(key) or [""])[0].strip()[:100]


def _control(q: dict[str, str]) -> list[str]:
    """Blank each filter holding a control character (it names nothing stored, and
    PostgreSQL refuses NUL in text); a problem line for each."""
    bad = [k for k, v in q.items() if any(not c.isprintable() for c in v)]
    for key in bad:
        q[key] = ""
    return [f"{key} contains a control character: ignored" for key in bad]


def svg_chart(lines: list[tuple[str, list[tuple[datetime, float | None]]]], until: datetime,
              label: str = "") -> str:
    """Step lines of price series on one labelled price axis and dated time axis, one line
    per pricing (class `on-demand` or `spot`), each ending in a dot at its newest price. The
    SVG scales with its box (viewBox, width 100%), so the newest point shows on a phone."""
    from markupsafe import Markup, escape

    lines = [(key, series) for key, series in lines if any(v is not None for _, v in series)]
    values = [v for _, series in lines for _, v in series if v is not None]
    lo, hi = min(values), max(values)
    ticks = [lo, (lo + hi) / 2, hi]
    if hi - lo < 1e-9:  # one price: its own value mid-axis, as the title writes it
        lo, hi = lo * 0.9, hi * 1.1 or 1.0
        ticks = [lo, values[0], hi]
    plot_w, plot_h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B
    t0, t1 = min(series[0][0] for _, series in lines).timestamp(), until.timestamp()

    def x(t: datetime) -> float:
        return PAD_L + (t.timestamp() - t0) / (t1 - t0) * plot_w

    def y(v: float) -> float:
        return PAD_T + (hi - v) / (hi - lo) * plot_h

    parts = [f'<svg class="chart" width="{CHART_W}" height="{CHART_H}" role="img" '
             f'aria-label="{escape(label)}" viewBox="0 0 {CHART_W} {CHART_H}" '
             f'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">']
    v: float | None  # a tick, then each point of a series (None: no price then)
    for v in ticks:
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{CHART_W - PAD_R}" '
                     f'y1="{y(v):.1f}" y2="{y(v):.1f}"/><text x="{PAD_L - 6}" '
                     f'y="{y(v) + 4:.1f}" text-anchor="end">{escape(money(v))}</text>')
    base = CHART_H - PAD_B
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{CHART_W - PAD_R}" y1="{base}" '
                 f'y2="{base}"/>')
    start = datetime.fromtimestamp(t0, UTC)
    mid = datetime.fromtimestamp((t0 + t1) / 2, UTC)
    for t, anchor in ((start, "start"), (mid, "middle"), (until, "end")):
        parts.append(f'<line class="axis" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{base}" '
                     f'y2="{base + 4}"/><text x="{x(t):.1f}" y="{base + 17}" '
                     f'text-anchor="{anchor}">{t:%m-%d %H:%M}</text>')
    parts.append('<text x="4" y="13">$/GPU-h</text>')
    for key, series in lines:
        css = PRICING_LABEL.get(key, key).replace("_", "-")
        path, prev, dot = [], None, None
        ends = [t for t, _ in series[1:]] + [until]
        for (t, v), end in zip(series, ends, strict=True):
            if v is None:
                prev = None
                continue
            path.append(f"{'L' if prev is not None else 'M'}{x(t):.1f},{y(v):.1f}"
                        f"L{x(end):.1f},{y(v):.1f}")
            prev, dot = v, (x(end), y(v))
        parts.append(f'<path class="line {css}" data-pricing="{escape(key)}" '
                     f'd="{"".join(path)}"><title>{escape(PRICING_LABEL.get(key, key))}'
                     f'</title></path>')
        if dot:
            parts.append(f'<circle class="dot {css}" cx="{dot[0]:.1f}" cy="{dot[1]:.1f}" '
                         f'r="3.5"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


#: How many of a spot offer's last band changes its row lists (the API has them all).
MAX_BANDS = 4


def band_history(points: list[tuple[int, str]] | None) -> str:
    """A spot offer's published band over time, under its row: each band from the day it
    was first read, the last MAX_BANDS; empty for an offer whose band never changed (its
    signal line says it)."""
    if not points or len(points) < 2:
        return ""
    shown = [f"{band} from {datetime.fromtimestamp(at, UTC):%Y-%m-%d}"
             for at, band in points[-MAX_BANDS:]]
    earlier = len(points) - len(shown)
    return "band history: " + (f"{earlier} earlier, " if earlier else "") + ", ".join(shown)


def _row(o: dict[str, Any], now: datetime,
         bands: list[tuple[int, str]] | None = None) -> dict[str, Any]:
    memory = o.get("gpu_memory_gb")
    return {"gpu": o["gpu"], "count": f"{o['gpu_count']:g}",
            "memory": f"{memory:g} GiB" if memory else "-",
            "per_gpu": money(o["price_per_gpu_usd"]), "per_hour": money(o["price_usd"]),
            "pricing": o["pricing"].replace("_", "-"), "source": o["source"],
            # a spot offer's interruption signal with its source and date (core.spot)
            "signal": (signal.label() if (signal := offer_signal(
                o["source"], o["pricing"], o.get("attributes"))) is not None else ""),
            "bands": band_history(bands),
            "region": o["region"] + (f"/{o['zone']}" if o["zone"] else ""),
            "instance": o["instance_type"],
            "available": {True: "yes", False: "no", None: "?"}[o["available"]],
            "seen": f"captured {o.get('captured') or 'date unknown'} (replayed)"
            if o.get("replayed") else f"{age(o['observed_at'], now)} ago"}


def render(engine: Engine, query: dict[str, list[str]], now: datetime | None = None) -> str:
    """The page for these query parameters."""
    from gpuradar.storage.dataset import UnknownGpu, resolve_gpus
    from gpuradar.storage.page_reads import first_observation, overview
    from gpuradar.storage.queries import OfferFilter
    from gpuradar.storage.signals import band_histories

    now = now or SYSTEM.now()
    q = {k: _one(query, k) for k in ("gpu", "pricing", "region", "source", "range")}
    problems = _control(q)
    try:
        pricing = parse_pricing(q["pricing"]) if q["pricing"] else None
    except ValueError as exc:
        problems.append(f"{exc}: showing every pricing")
        pricing = None
    range_key = q.pop("range") or DEFAULT_RANGE
    if range_key not in RANGES:
        problems.append(f"range {range_key!r} is not one of {', '.join(RANGES)}: showing "
                        f"{RANGES[DEFAULT_RANGE][0]}")
        range_key = DEFAULT_RANGE
    range_label, length, buckets = RANGES[range_key]
    if length is None:  # all: from the oldest stored offer, at least a day
        first = first_observation(engine)
        length = max(now - first, timedelta(days=1)) if first else timedelta(days=1)
    try:  # the command line's and the API's reading, and their "did you mean"
        names = resolve_gpus(engine, q["gpu"])
    except UnknownGpu as exc:
        problems.append(str(exc))
        names = [q["gpu"]]  # matches nothing: the table says so under the problem
    flt = OfferFilter(gpus=names, pricing=pricing, sources=[q["source"]] if q["source"] else [],
                      regions=[q["region"]] if q["region"] else [])
    data = overview(engine, flt, days=length / timedelta(days=1), now=now, buckets=buckets)
    stored = data["gpus"]
    empty = ("No offer matches these filters." if stored
             else "No offers stored yet: the first crawls are still running.")
    filters = {k: v for k, v in q.items() if v}
    uncharted = _uncharted(data["uncharted"], data["since"], now)
    weekly_pricing = pricing or "spot"
    weekly = _weekly(engine, names, weekly_pricing, flt.regions, now) if q["gpu"] else None
    bands = band_histories(engine, [o["id"] for o in data["cheapest"] if o["pricing"] == SPOT])
    return _TEMPLATE.render(
        css=CSS, q=q, pricing_choices=PRICING_CHOICES, now=f"{now:%Y-%m-%d %H:%M}",
        problem="; ".join(problems), empty=empty,
        refresh=REFRESH_SECONDS, refresh_text=_duration(REFRESH_SECONDS),
        gpus=stored, source_names=[s["source"] for s in data["sources"]],
        range_key=range_key, range_label=range_label,
        longer="/?" + urlencode({**filters, "range": "all"}) if range_key != "all" else "",
        ranges=[{"label": label, "current": key == range_key,
                 "href": "/?" + urlencode({**filters, "range": key})}
                for key, (label, _, _) in RANGES.items()],
        cheapest=[_row(o, now, bands.get(o["id"])) for o in data["cheapest"]],
        alerts=[{"name": a["name"], "description": a["description"],
                 "since": f"{_aware(a['fired_at']):%Y-%m-%d %H:%M}" if a["fired_at"]
                 else "-", "best": money(a["best_value"], a["currency"] or "USD"),
                 "matches": a["match_count"]} for a in data["alerts"]],
        sources=[{**s, "css": {CrawlStatus.OK: "ok",
                               CrawlStatus.PARTIAL: "warn"}.get(s["status"], "bad"),
                  "last_crawl": age(s["last_crawl"], now),
                  "last_success": f"{age(s['last_success'], now)} ago" if s["last_success"]
                  else "never", "data_as_of": _data_as_of(s, now),
                  "stale": _stale(data["stale"], s["source"])} for s in data["sources"]],
        source_errors=any(s["error"] for s in data["sources"]),  # else no empty column
        replayed=", ".join(f"{s['source']} captured {s['captured'] or 'on an unknown date'}"
                           for s in data["sources"] if s["replayed"]),
        charts=[_history_chart(c, data["until"], range_label) for c in data["charts"]],
        uncharted=uncharted, listed=len(data["listed"]),
        uncharted_count=len({o["gpu"] for o in data["uncharted"]}),
        index=[_index_chart(c, data["until"]) for c in data["index"]],
        index_hidden=data["index_total"] - len(data["index"]),
        weekly=weekly, pattern_days=PATTERN_DAYS,
        weekly_pricing=PRICING_LABEL.get(weekly_pricing, weekly_pricing).capitalize())


#: The history the weekly profiles read (the API's default for /patterns), and how many
#: GPU-region profiles the page draws at most (the API has them all).
PATTERN_DAYS = 90
MAX_WEEKLY = 6


def _weekly(engine: Engine, gpus: list[str], pricing: str, regions: Sequence[str],
            now: datetime) -> list[dict[str, Any]]:
    """The weekly profile of each model and region of these GPUs (gpuradar.core.patterns),
    those resting on the most hours first; a profile the history cannot support says so."""
    from gpuradar.core.patterns import compute_all
    from gpuradar.storage.queries import pattern_spans

    found = compute_all(pattern_spans(engine, gpus, now - timedelta(days=PATTERN_DAYS), now,
                                      pricing, regions), now)
    found.sort(key=lambda p: -p.samples)
    out = []
    for p in found[:MAX_WEEKLY]:
        title = f"{p.gpu} {PRICING_LABEL.get(p.pricing, p.pricing)} {p.region}"
        vol = (f"volatility {p.volatility * 100:.2f}%/day over {p.volatility_changes} days"
               if p.volatility is not None else "volatility: not enough history")
        if not p.profile:
            out.append({"gpu": p.gpu, "region": p.region, "title": title, "svg": "",
                        "detail": "not enough history: " + "; ".join(p.not_enough)})
            continue
        best = p.profile[p.cheapest_hours[0]]
        if len(p.cheapest_hours) == len(p.profile):
            when = f"the same every hour of the week, {money(best.mean)}"
        else:
            hours = ", ".join(p.profile[h].label for h in p.cheapest_hours[:3])
            more = f" and {len(p.cheapest_hours) - 3} more" if len(p.cheapest_hours) > 3 else ""
            when = f"cheapest {hours}{more} UTC at {money(best.mean)}"
        out.append({"gpu": p.gpu, "region": p.region, "title": title,
                    "svg": weekly_svg([b.mean for b in p.profile], set(p.cheapest_hours),
                                      f"{title}: mean price per GPU-hour by hour of the week"),
                    "detail": f"{when} ({p.weeks} weeks); {vol}"})
    return out


def weekly_svg(means: list[float | None], cheapest: set[int], label: str = "") -> str:
    """168 bars, one per hour of the week (Monday 00:00 UTC first), their height the mean
    price between the lowest and the highest; the cheapest hours in the spot colour."""
    from markupsafe import Markup, escape

    values = [v for v in means if v is not None]
    lo, hi = min(values), max(values)
    span = hi - lo
    plot_w, plot_h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B
    step = plot_w / len(means)
    base = CHART_H - PAD_B
    parts = [f'<svg class="chart" width="{CHART_W}" height="{CHART_H}" role="img" '
             f'aria-label="{escape(label)}" viewBox="0 0 {CHART_W} {CHART_H}" '
             f'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">',
             '<text x="4" y="13">$/GPU-h</text>']
    for bound, text in ((lo, money(lo)), (hi, money(hi))):
        y = base - (plot_h * 0.15 if span < 1e-12 or bound == lo else plot_h)
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{CHART_W - PAD_R}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/><text x="{PAD_L - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{escape(text)}</text>')
    for i, v in enumerate(means):
        if v is None:
            continue
        # the lowest mean still shows: 15 % of the plot, the highest all of it
        height = plot_h * (0.15 + 0.85 * ((v - lo) / span if span > 1e-12 else 0))
        css = "hour cheapest" if i in cheapest else "hour"
        parts.append(f'<rect class="{css}" x="{PAD_L + i * step:.2f}" y="{base - height:.1f}" '
                     f'width="{step * 0.9:.2f}" height="{height:.1f}"><title>'
                     f'{escape(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"][i // 24])} '
                     f'{i % 24:02d}:00 UTC {escape(money(v))}</title></rect>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{CHART_W - PAD_R}" y1="{base}" '
                 f'y2="{base}"/>')
    for day, name in enumerate(("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")):
        x = PAD_L + day * 24 * step
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{base}" '
                     f'y2="{base + 4}"/><text x="{x + 12 * step:.1f}" y="{base + 17}" '
                     f'text-anchor="middle">{name}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _history_chart(chart: dict[str, Any], until: datetime, range_label: str) -> dict[str, Any]:
    """One GPU's chart: its spot and on-demand lines and a legend with each one's range."""
    keys = []
    for pricing in PRICINGS:
        values = [v for _, v in chart["series"].get(pricing, []) if v is not None]
        if values:
            keys.append({"label": PRICING_LABEL[pricing], "css": PRICING_LABEL[pricing],
                         "low": money(min(values)), "high": money(max(values))})
    lines = sorted(chart["series"].items(), key=lambda kv: kv[0] != "on_demand")
    label = (f"{chart['gpu']}: cheapest {' and '.join(k['label'] for k in keys)} price per "
             f"GPU-hour, last {range_label}")
    return {"gpu": chart["gpu"], "legend": keys, "svg": svg_chart(lines, until, label)}


def _uncharted(offers: list[dict[str, Any]], since: datetime,
               now: datetime) -> list[dict[str, Any]]:
    """The listed GPUs without a chart, grouped by why their prices fall outside the range:
    replayed data is dated at its capture; live data was last seen before the range."""
    groups: dict[str, list[str]] = {}
    for o in offers:
        if o.get("replayed"):
            why = (f"replayed from {o['source']}'s capture of {o['captured']}" if o["captured"]
                   else f"replayed from a {o['source']} recording of unknown date")
        elif o.get("observed_at") and _aware(o["observed_at"]) < since:
            why = f"{o['source']}: last seen {age(o['observed_at'], now)} ago"
        else:
            why = f"{o['source']}: no price recorded in this range"
        if o["gpu"] not in groups.setdefault(why, []):  # a GPU once, whatever its pricings
            groups[why].append(o["gpu"])
    return [{"why": why, "gpus": gpus} for why, gpus in groups.items()]


def _duration(seconds: int) -> str:
    return f"{seconds // 60} minutes" if seconds % 60 == 0 else f"{seconds} seconds"


def _index_chart(chart: dict[str, Any], until: datetime) -> dict[str, Any]:
    f = chart["figure"]
    pricing = PRICING_LABEL.get(f["pricing"], f["pricing"])
    providers = f"{f['providers']} provider{'s' if f['providers'] != 1 else ''}"
    return {"title": f"{f['gpu']} {pricing}: {money(f['median'])}",
            "svg": svg_chart([(f["pricing"], chart["series"])], until,
                             f"{f['gpu']} {pricing} market index median per GPU-hour"),
            "detail": f"p10 {money(f['p10'])}, p90 {money(f['p90'])}; {f['offers']} offers "
                      f"from {providers}" + ("; thin: fewer providers than the minimum "
                                             "panel, not the market"
                                             if f["status"] == "thin" else "")}


def _data_as_of(s: dict[str, Any], now: datetime) -> str:
    """What date a source's stored data has: its age, or a replay's capture date."""
    if s["replayed"]:
        return f"captured {s['captured'] or 'date unknown'} (replayed)"
    return f"{age(s['observed_at'], now)} ago" if s["observed_at"] else "-"


def _stale(alerts: dict[str, dict[str, Any]], source: str) -> str:
    """A source's stale alert (the alert engine's judgement, as `gpuradar alerts` lists it):
    'stale since ...', or '-' when it has none firing."""
    alert = alerts.get(source)
    if alert is None or alert["state"] != "firing":
        return "-"
    since = alert["fired_at"]
    return f"stale since {_aware(since):%Y-%m-%d %H:%M} UTC" if since else "stale"


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def page(environ: dict[str, Any], start_response: Callable, engine: Engine,
         redact: Callable[[str], str] = str) -> Iterable[bytes]:
    """WSGI answer for `/`: the page, or a one-line 503 (secrets masked) when the database
    cannot be read."""
    try:
        body = render(engine, parse_qs(environ.get("QUERY_STRING") or "")).encode()
    except DATABASE_ERRORS as exc:
        start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")])
        return [redact(f"the database cannot be read: {first_line(exc)}\n").encode()]
    except Exception as exc:  # noqa: BLE001 - a bug: said and logged, the service goes on
        log.error("the page failed: %s: %s", type(exc).__name__, redact(str(exc)), exc_info=exc)
        start_response("500 Internal Server Error",
                       [("Content-Type", "text/plain; charset=utf-8")])
        return [f"internal error ({type(exc).__name__}); the service's log has the details\n"
                .encode()]
    start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                              ("Cache-Control", "no-store"),
                              ("Content-Security-Policy", "default-src 'none'; "
                               "style-src 'unsafe-inline'; img-src 'self'; form-action 'self'")])
    return [body]


def read_only(app: Callable) -> Callable:
    """Answer anything but GET and HEAD with 405: nothing on this port changes state."""

    def guarded(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method == "OPTIONS" and (environ.get("PATH_INFO") or "").startswith("/api/"):
            return app(environ, start_response)  # a CORS preflight: the API answers it
        if method not in ("GET", "HEAD"):
            if (environ.get("PATH_INFO") or "").startswith("/api/"):  # the API speaks JSON
                start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"),
                                                          ("Content-Type", "application/json")])
                return [b'{"error":"read-only: only GET and HEAD"}\n']
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"),
                                                      ("Content-Type", "text/plain")])
            return [b"read-only: only GET and HEAD\n"]
        return app(environ, start_response)

    return guarded
