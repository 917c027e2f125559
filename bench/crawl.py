"""The whole crawl path, side by side with a bare Scrapy spider, in one run.

A local HTTP server serves N Azure Retail Prices meters (the real response shape: 1,000 items
a page chained by `NextPageLink`, fields as in tests/fixtures/azure/prices_page1.json) for
real Azure GPU sizes. Two whole processes read the same pages:

- the bare spider (bench/bare_spider.py): `json.loads` each page and yield the items as
  dicts, no pipelines — what Scrapy itself costs;
- `gpuradar crawl azure` into a fresh database: first crawl (every offer new), second
  (unchanged), third (2 % of prices changed).

Offers are distinct by region: the size list is repeated over numbered bench regions, so
100,000 meters are 100,000 offers. Peak RSS is each child's own high-water mark (VmHWM, read
as it exits), CPU time its own rusage (wait4): on a loaded machine the CPU-time ratio says
what the crawl path costs when the wall-clock ratio also measures waiting for a core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent
PAGE = 1000
# Real Azure GPU sizes and their East US pay-as-you-go prices on the fixture's date
# (tests/fixtures/azure/prices_page1.json, captured from prices.azure.com).
SIZES: list[tuple[str, str, float]] = [
    ("Standard_NC24ads_A100_v4", "NC24ads A100 v4", 3.673),
    ("Standard_NC48ads_A100_v4", "NC48ads A100 v4", 7.346),
    ("Standard_NC96ads_A100_v4", "NC96ads A100 v4", 14.692),
    ("Standard_NC40ads_H100_v5", "NC40ads H100 v5", 6.98),
    ("Standard_NC80adis_H100_v5", "NC80adis H100 v5", 13.96),
    ("Standard_ND96isr_H100_v5", "ND96isr H100 v5", 98.32),
    ("Standard_NC4as_T4_v3", "NC4as T4 v3", 0.526),
    ("Standard_NC8ads_A10_v4", "NC8ads A10 v4", 0.909),
    ("Standard_NV36ads_A10_v5", "NV36ads A10 v5", 3.2),
    ("Standard_ND96amsr_A100_v4", "ND96amsr A100 v4", 32.77),
]


def meter(i: int, changed: bool) -> dict[str, Any]:
    arm, sku, price = SIZES[i % len(SIZES)]
    spot = (i // len(SIZES)) % 2 == 1
    region = f"benchregion{i // (2 * len(SIZES)):05d}"
    if spot:
        price = round(price * 0.4, 4)
    if changed and i % 50 == 0:  # 2 % of offers
        price = round(price * 1.07, 4)
    name = f"{sku} Spot" if spot else sku
    return {
        "currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price,
        "unitPrice": price, "armRegionName": region, "location": region,
        "effectiveStartDate": "2025-06-01T00:00:00Z",
        "meterId": f"00000000-0000-0000-0000-{i:012d}", "meterName": name,
        "productId": "DZH318Z0DEGZ", "skuId": f"DZH318Z0XXXX/{i:04d}",
        "productName": f"Virtual Machines {sku.split()[0]} Series",
        "skuName": name, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": "Consumption",
        "isPrimaryMeterRegion": True, "armSkuName": arm,
    }


class MeterServer:
    """Pages pre-encoded in memory (so the server costs the crawl as little CPU as possible);
    `changed` switches to the variant with 2 % of prices changed."""

    def __init__(self, n: int) -> None:
        self.n, self.changed = n, False
        self.pages = {flag: [self._page(k, flag) for k in range(0, n, PAGE)]
                      for flag in (False, True)}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                skip = int(parse_qs(urlsplit(self.path).query).get("$skip", ["0"])[0])
                pages = server.pages[server.changed]
                body = pages[skip // PAGE] if skip // PAGE < len(pages) else b'{"Items": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")  # HTTP/1.0: no pooled reuse
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/api/retail/prices"

    def _page(self, start: int, changed: bool) -> bytes:
        end = min(start + PAGE, self.n)
        nxt = (f"{{base}}?api-version=2023-01-01-preview&$skip={end}" if end < self.n
               else None)
        body = {"BillingCurrency": "USD", "CustomerEntityId": "Default",
                "CustomerEntityType": "Retail",
                "Items": [meter(i, changed) for i in range(start, end)],
                "NextPageLink": nxt, "Count": end - start}
        return json.dumps(body).encode()

    def __enter__(self) -> MeterServer:
        port_url = self.url
        for flag in self.pages:
            self.pages[flag] = [p.replace(b"{base}", port_url.encode()) for p in self.pages[flag]]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# Runs `python -m MODULE ARGS...` and writes the process's own peak RSS (VmHWM, kB) to the
# file named by GPURADAR_BENCH_PEAK when it exits. Not the child's ru_maxrss: Linux carries a
# forked child's high-water mark over from the parent's memory at the fork (exec keeps it),
# so a child of this bench process -- which holds every page the server sends, and whatever
# the benchmarks before it allocated -- would report at least the bench's own size.
_PEAK_WRAPPER = """
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as f:
        hwm = next(line for line in f if line.startswith("VmHWM:"))
    with open(os.environ["GPURADAR_BENCH_PEAK"], "w") as out:
        out.write(hwm.split()[1])
atexit.register(_peak)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def timed(module: list[str], cwd: Path, env: dict[str, str]
          ) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS MB of the process itself, stdout, its CPU seconds) of one
    whole `python -m` process (`module`: the module and its arguments). CPU time is what to
    compare on a loaded machine: wall time also counts waiting for a core."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _PEAK_WRAPPER, *module], cwd=cwd,
                                env={**env, "GPURADAR_BENCH_PEAK": peak.name}, stdout=out,
                                stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        rss_kb = peak.read().strip()
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(module[:3])} exited {proc.returncode}: {tail}")
    return wall, int(rss_kb) / 1024, stdout, usage.ru_utime + usage.ru_stime


def crawl_figures(n: int, database_url_for: dict[str, str], workdir: Path) -> dict[str, Any]:
    """items/s of the bare spider and of `gpuradar crawl azure` (new, unchanged, 2 % changed)
    for each database, with each run's peak RSS."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GPURADAR_CONFIG", None)
    gpuradar = ["gpuradar"]
    out: dict[str, Any] = {"n": n}
    with MeterServer(n) as server:
        config = workdir / "bench-config.yaml"
        # One region: the spider walks a chain per region, and the server answers every
        # request with the same N meters (whatever region they name).
        config.write_text(f"endpoints:\n  azure.prices: {server.url}\n"
                          "sources:\n  azure:\n    regions: [eastus]\n")
        bare = Path(__file__).with_name("bare_spider.py")
        wall, rss, stdout, cpu = timed(["scrapy", "runspider", str(bare), "-a",
                                        f"url={server.url}", "-s", "LOG_LEVEL=ERROR"],
                                       workdir, env)
        items = int(stdout.strip().splitlines()[-1])
        if items != n:
            raise RuntimeError(f"bare spider read {items} of {n} items")
        out["bare_items_per_s"], out["bare_rss_mb"], out["bare_cpu_s"] = n / wall, rss, cpu
        for kind, url in database_url_for.items():
            runs: dict[str, dict[str, float]] = {}
            for label, changed in (("new", False), ("unchanged", False), ("changed", True)):
                server.changed = changed
                wall, rss, stdout, cpu = timed([*gpuradar, "crawl", "azure", "-c", str(config),
                                                "--database-url", url, "--json"], REPO, env)
                result = json.loads(stdout)[0]
                expect = {"new": ("new_offers", n), "changed": ("changed", n // 50)}.get(label)
                if result["items"] != n or result["status"] != "ok" or (
                        expect and result[expect[0]] != expect[1]):
                    seen = {k: result[k] for k in ("status", "items", "new_offers", "changed")}
                    raise RuntimeError(f"gpuradar crawl ({label}) did not store what it "
                                       f"read: {seen}")
                runs[label] = {"items_per_s": n / wall, "seconds": wall, "rss_mb": rss,
                               "cpu_s": cpu}
            out[kind] = runs
    return out


def add_figures(figs: Any, n: int, tmp: Path, pg_url: str | None) -> None:
    """The bench table's rows: items/s and ratio to the bare spider (wall clock and CPU
    time), peak RSS, PG/SQLite. The targets: >= 0.60 of the bare spider (first crawl), >= 0.75
    (unchanged) at 100,000 offers and >= 0.60 for both in the quick run; peak RSS <= 200 MB
    at 100,000 offers (printed at smaller sizes)."""
    urls = {"sqlite": f"sqlite:///{tmp}/crawl-bench.db"}
    if pg_url:
        urls["postgres"] = pg_url
    r = crawl_figures(n, urls, tmp)
    bare, bare_cpu = r["bare_items_per_s"], r["bare_cpu_s"]
    full = n >= 100_000
    figs.add(f"bare Scrapy spider, {n:,} Azure-shaped meters (json, no pipelines; peak "
             f"{r['bare_rss_mb']:.0f} MB, CPU {bare_cpu:.1f} s)", bare, None,
             "(the yardstick)", None, "items/s")
    goal = {"new": 0.60, "unchanged": 0.75 if full else 0.60, "changed": None}
    for label, what in (("new", "first crawl, all new"), ("unchanged", "unchanged"),
                        ("changed", "2 % changed")):
        s, pg = r["sqlite"][label], r.get("postgres", {}).get(label)
        ratios = [x["items_per_s"] / bare for x in (s, pg) if x]
        target = goal[label]
        figs.add(f"gpuradar crawl azure, {what}", s["items_per_s"],
                 pg["items_per_s"] if pg else None,
                 f">= {target:.2f} of the bare spider" if target else "printed",
                 min(ratios) >= target if target else None, "items/s")
        figs.add(f"  ratio to the bare spider ({what})", ratios[0],
                 ratios[1] if pg else None, "", None, "x")
        figs.add(f"  ratio of CPU time, bare / gpuradar ({what})", bare_cpu / s["cpu_s"],
                 bare_cpu / pg["cpu_s"] if pg else None, "printed", None, "x")
        rss = max(s["rss_mb"], pg["rss_mb"] if pg else 0)
        figs.add(f"  peak RSS ({what})", s["rss_mb"], pg["rss_mb"] if pg else None,
                 "<= 200 MB" if full else "printed (target at 100,000)",
                 rss <= 200 if full else None, "MB")
    if "postgres" in r:
        slow = max(r["postgres"][k]["seconds"] / r["sqlite"][k]["seconds"]
                   for k in ("new", "unchanged", "changed"))
        figs.add("  PostgreSQL time / SQLite time (worst of the three)", slow, None,
                 "<= 1.5x", slow <= 1.5, "x")
