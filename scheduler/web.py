"""The read-only web page at `/` of the service's metrics port.

Server-rendered HTML that needs no JavaScript: the cheapest live offer per GPU (filtered by
GPU, pricing, region and source through query parameters), each source's freshness and
health, the alerts firing now, the market index's median per model and a price-history chart
per GPU, drawn as inline SVG. The CSS
is inline too: the page makes no request anywhere. Nothing changes state over HTTP: every
method but GET and HEAD is answered 405.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment
from sqlalchemy import Engine

from gpuradar.core import gpus as catalog
from gpuradar.core.units import age, money

CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 560, 180, 64, 12, 22, 28

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;
color:#1d232a}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em}
table{border-collapse:collapse;width:100%}th,td{padding:.25em .6em;text-align:left;
border-bottom:1px solid #e3e6ea;white-space:nowrap}th{background:#f4f6f8}
td.num{text-align:right;font-variant-numeric:tabular-nums}
form{display:flex;gap:.8em;flex-wrap:wrap;align-items:end;background:#f4f6f8;
padding:.6em .8em;border-radius:6px}label{display:flex;flex-direction:column;font-size:.85em}
.ok{color:#1a7f37}.bad{color:#b42318}.warn{color:#9a6700}.muted{color:#667085}
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-weight:600}
svg text{font:11px system-ui,sans-serif;fill:#475467}svg .line{fill:none;stroke:#2563eb;
stroke-width:2}svg .axis{stroke:#98a2b3}svg .grid{stroke:#eaecf0}
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuradar</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{{ css }}</style></head><body>
<h1>gpuradar</h1>
<p class="muted">Cheapest GPU offers, read from this service's database at
{{ now }} UTC. Read-only; also <a href="/metrics">/metrics</a>,
<a href="/healthz">/healthz</a> and the JSON API
(<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>).</p>
<form method="get" action="/">
 <label>GPU <input name="gpu" value="{{ q.gpu }}" list="gpus" placeholder="H100"></label>
 <datalist id="gpus">{% for g in gpus %}<option value="{{ g }}">{% endfor %}</datalist>
 <label>pricing <select name="pricing">
  {% for value, text in [("", "any"), ("on-demand", "on-demand"), ("spot", "spot")] %}
  <option value="{{ value }}"{% if q.pricing == value %} selected{% endif %}>{{ text }}</option>
  {% endfor %}</select></label>
 <label>region <input name="region" value="{{ q.region }}" placeholder="us-* or mainland">
 </label>
 <label>source <select name="source"><option value="">any</option>
  {% for s in source_names %}<option{% if q.source == s %} selected{% endif %}>{{ s }}</option>
  {% endfor %}</select></label>
 <button type="submit">Filter</button> <a href="/">clear</a>
</form>
{% if problem %}<p class="bad">{{ problem }}</p>{% endif %}

<h2>Cheapest offer per GPU</h2>
{% if replayed %}<p class="warn" id="replayed">Replayed from recordings, not live: {{ replayed }}.
Their prices are as of the capture date.</p>{% endif %}
{% if cheapest %}
<table id="cheapest"><thead><tr><th>GPU</th><th>GPUs</th><th>memory/GPU</th>
<th>$/GPU-h</th><th>$/h</th><th>pricing</th><th>source</th><th>region</th><th>instance</th>
<th>available</th><th>seen</th></tr></thead><tbody>
{% for o in cheapest %}<tr><td>{{ o.gpu }}</td><td class="num">{{ o.count }}</td>
<td class="num">{{ o.memory }}</td><td class="num">{{ o.per_gpu }}</td>
<td class="num">{{ o.per_hour }}</td><td>{{ o.pricing }}</td><td>{{ o.source }}</td>
<td>{{ o.region }}</td><td>{{ o.instance }}</td><td>{{ o.available }}</td>
<td>{{ o.seen }}</td></tr>
{% endfor %}</tbody></table>
{% else %}<p class="muted">{{ empty }}</p>{% endif %}

<h2>Alerts firing</h2>
{% if alerts %}
<table id="alerts"><thead><tr><th>rule</th><th>condition</th><th>since</th><th>best</th>
<th>matches</th></tr></thead><tbody>
{% for a in alerts %}<tr><td>{{ a.name }}</td><td>{{ a.description }}</td>
<td>{{ a.since }}</td><td class="num">{{ a.best }}</td><td class="num">{{ a.matches }}</td>
</tr>{% endfor %}</tbody></table>
{% else %}<p class="muted">No alert is firing.</p>{% endif %}

<h2>Sources</h2>
{% if sources %}
<table id="sources"><thead><tr><th>source</th><th>last crawl</th><th>last success</th>
<th>data as of</th><th>failures since</th><th>offers</th><th>error</th></tr></thead><tbody>
{% for s in sources %}<tr><td>{{ s.source }}</td>
<td class="{{ s.css }}">{{ s.status }}, {{ s.last_crawl }} ago</td>
<td>{{ s.last_success }}</td><td>{{ s.data_as_of }}</td><td class="num">{{ s.failures }}</td>
<td class="num">{{ s.offers }}</td><td>{{ s.error }}</td></tr>{% endfor %}
</tbody></table>
{% else %}<p class="muted">No crawl has run yet.</p>{% endif %}

<h2>Market index, last {{ days }} days (median per GPU-hour)</h2>
<p class="muted">Over fresh, available offers, each offer one vote, outliers screened
(<a href="/api/v1/openapi.json">/api/v1/index</a> has the figures and excluded offers).</p>
<div class="charts" id="index">{% for c in index %}
<figure><figcaption>{{ c.title }}</figcaption>{{ c.svg }}
<div class="muted">{{ c.detail }}</div></figure>{% else %}
<p class="muted">No index yet: it is computed after each crawl.</p>{% endfor %}</div>

<h2>Price history, last {{ days }} days (cheapest per GPU-hour)</h2>
<div class="charts">{% for c in charts %}
<figure><figcaption>{{ c.gpu }}</figcaption>{{ c.svg }}</figure>{% else %}
<p class="muted">No history yet.</p>{% endfor %}</div>
</body></html>
"""

_ENV = Environment(autoescape=True)
_TEMPLATE = _ENV.from_string(PAGE)


def _one(query: dict[str, list[str]], key: str) -> str:
    return (query.get(key) or [""])[0].strip()[:100]


def svg_chart(series: list[tuple[datetime, float | None]], until: datetime) -> str:
    """A step line of a price series, with a labelled price axis and dated time axis."""
    from markupsafe import Markup, escape

    values = [v for _, v in series if v is not None]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo * 0.9, hi * 1.1 or 1.0
    plot_w, plot_h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B
    t0, t1 = series[0][0].timestamp(), until.timestamp()

    def x(t: datetime) -> float:
        return PAD_L + (t.timestamp() - t0) / (t1 - t0) * plot_w

    def y(v: float) -> float:
        return PAD_T + (hi - v) / (hi - lo) * plot_h

    path, prev = [], None
    ends = [t for t, _ in series[1:]] + [until]
    for (t, v), end in zip(series, ends, strict=True):
        if v is None:
            prev = None
            continue
        path.append(f"{'L' if prev is not None else 'M'}{x(t):.1f},{y(v):.1f}"
                    f"L{x(end):.1f},{y(v):.1f}")
        prev = v
    parts = [f'<svg class="chart" width="{CHART_W}" height="{CHART_H}" role="img" '
             f'viewBox="0 0 {CHART_W} {CHART_H}" xmlns="http://www.w3.org/2000/svg">']
    for k in range(3):
        v = lo + (hi - lo) * k / 2
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{CHART_W - PAD_R}" '
                     f'y1="{y(v):.1f}" y2="{y(v):.1f}"/><text x="{PAD_L - 6}" '
                     f'y="{y(v) + 4:.1f}" text-anchor="end">{escape(money(v))}</text>')
    base = CHART_H - PAD_B
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{CHART_W - PAD_R}" y1="{base}" '
                 f'y2="{base}"/>')
    mid = datetime.fromtimestamp((t0 + t1) / 2, UTC)
    for t, anchor in ((series[0][0], "start"), (mid, "middle"), (until, "end")):
        parts.append(f'<line class="axis" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{base}" '
                     f'y2="{base + 4}"/><text x="{x(t):.1f}" y="{base + 16}" '
                     f'text-anchor="{anchor}">{t:%m-%d %H:%M}</text>')
    parts.append('<text x="4" y="12">$/GPU-h</text>')
    parts.append(f'<path class="line" d="{"".join(path)}"/></svg>')
    return Markup("".join(parts))


def _row(o: dict[str, Any], now: datetime) -> dict[str, Any]:
    memory = o.get("gpu_memory_gb")
    return {"gpu": o["gpu"], "count": f"{o['gpu_count']:g}",
            "memory": f"{memory:g} GB" if memory else "-",
            "per_gpu": money(o["price_per_gpu_usd"]), "per_hour": money(o["price_usd"]),
            "pricing": o["pricing"].replace("_", "-"), "source": o["source"],
            "region": o["region"] + (f"/{o['zone']}" if o["zone"] else ""),
            "instance": o["instance_type"],
            "available": {True: "yes", False: "no", None: "?"}[o["available"]],
            "seen": f"captured {o.get('captured') or 'date unknown'} (replayed)"
            if o.get("replayed") else f"{age(o['observed_at'], now)} ago"}


def render(engine: Engine, query: dict[str, list[str]], now: datetime | None = None,
           days: float = 7.0) -> str:
    """The page for these query parameters."""
    from gpuradar.storage.queries import OfferFilter
    from gpuradar.storage.web import overview

    now = now or datetime.now(UTC)
    q = {k: _one(query, k) for k in ("gpu", "pricing", "region", "source")}
    problem = ""
    pricing = q["pricing"].replace("-", "_") or None
    if pricing not in (None, "on_demand", "spot"):
        problem, pricing = f"pricing {q['pricing']!r} is neither on-demand nor spot", None
    names: list[str] = []
    if q["gpu"]:
        names = [g.name for g in catalog.match_family(q["gpu"])] or [q["gpu"]]
    flt = OfferFilter(gpus=names, pricing=pricing, sources=[q["source"]] if q["source"] else [],
                      regions=[q["region"]] if q["region"] else [])
    data = overview(engine, flt, days=days, now=now)
    stored = data["gpus"]
    empty = ("No offer matches these filters." if stored
             else "No offers stored yet: the first crawls are still running.")
    return _TEMPLATE.render(
        css=CSS, q=q, now=f"{now:%Y-%m-%d %H:%M}", problem=problem, empty=empty,
        gpus=stored, source_names=[s["source"] for s in data["sources"]], days=f"{days:g}",
        cheapest=[_row(o, now) for o in data["cheapest"]],
        alerts=[{"name": a["name"], "description": a["description"],
                 "since": f"{_aware(a['fired_at']):%Y-%m-%d %H:%M} UTC" if a["fired_at"]
                 else "-", "best": money(a["best_value"], a["currency"] or "USD"),
                 "matches": a["match_count"]} for a in data["alerts"]],
        sources=[{**s, "css": {"ok": "ok", "partial": "warn"}.get(s["status"], "bad"),
                  "last_crawl": age(s["last_crawl"], now),
                  "last_success": f"{age(s['last_success'], now)} ago" if s["last_success"]
                  else "never", "data_as_of": _data_as_of(s, now)} for s in data["sources"]],
        replayed=", ".join(f"{s['source']} captured {s['captured'] or 'on an unknown date'}"
                           for s in data["sources"] if s["replayed"]),
        charts=[{"gpu": c["gpu"], "svg": svg_chart(c["series"], data["until"])}
                for c in data["charts"]],
        index=[_index_chart(c, data["until"]) for c in data["index"]])


def _index_chart(chart: dict[str, Any], until: datetime) -> dict[str, Any]:
    f = chart["figure"]
    providers = f"{f['providers']} provider{'s' if f['providers'] != 1 else ''}"
    return {"title": f"{f['gpu']} {f['pricing'].replace('_', '-')}: {money(f['median'])}",
            "svg": svg_chart(chart["series"], until),
            "detail": f"p10 {money(f['p10'])}, p90 {money(f['p90'])}; {f['offers']} offers "
                      f"from {providers}"}


def _data_as_of(s: dict[str, Any], now: datetime) -> str:
    """What date a source's stored data has: its age, or a replay's capture date."""
    if s["replayed"]:
        return f"captured {s['captured'] or 'date unknown'} (replayed)"
    return f"{age(s['observed_at'], now)} ago" if s["observed_at"] else "-"


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def page(environ: dict[str, Any], start_response: Callable, engine: Engine,
         redact: Callable[[str], str] = str) -> Iterable[bytes]:
    """WSGI answer for `/`: the page, or a one-line 503 (secrets masked) when the database
    cannot be read."""
    try:
        body = render(engine, parse_qs(environ.get("QUERY_STRING") or "")).encode()
    except Exception as exc:  # noqa: BLE001 - the page reports, the service goes on
        message = str(exc).strip().splitlines()[0][:200] if str(exc) else type(exc).__name__
        start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")])
        return [redact(f"the database cannot be read: {message}\n").encode()]
    start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                              ("Cache-Control", "no-store"),
                              ("Content-Security-Policy", "default-src 'none'; "
                               "style-src 'unsafe-inline'; img-src 'self'; form-action 'self'")])
    return [body]


def read_only(app: Callable) -> Callable:
    """Answer anything but GET and HEAD with 405: nothing on this port changes state."""

    def guarded(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"),
                                                      ("Content-Type", "text/plain")])
            return [b"read-only: only GET and HEAD\n"]
        return app(environ, start_response)

    return guarded
