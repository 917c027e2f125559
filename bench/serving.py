"""The read side under load, side by side in one run (issue #54): the same `/api/v1/offers`
and `/` answers from

* `static`: precomputed bytes sent from the event loop of the server `gpuradar serve` uses
  (scheduler/server.py's ReadServer: uvicorn; the ceiling);
* `serve`: `gpuradar serve` itself (scheduler/server.py);
* `wsgiref`: the daemon's former server for the page and API, prometheus-client's
  ThreadingWSGIServer (the standard library's wsgiref: HTTP/1.0, a thread per request),
  drawing every answer;

each in a process of its own, loaded by wrk (Debian's `wrk`: keep-alive where the server
keeps it) at 50 connections (the ceiling and `serve` in turns, ROUNDS rounds); and
`/metrics` of a running `gpuradar run` scraped as Prometheus does (OpenMetrics, gzip),
first alone and then while its page, served by its child process
(scheduler/web_child.py), is under the same load. The data: every shipped
recording replayed.

`python -m bench.serving` prints the figures alone; `python -m bench` adds them as rows.
`python -m bench.serving candidates` compares the servers that were weighed for the read side
(docs/architecture.md), each in turn in one run: static bytes on each, and the read app on
each that can run it; those not installed (waitress, granian: not dependencies) are left out.
"""

from __future__ import annotations

import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORDINGS = REPO / "gpuradar" / "recordings"
CONNECTIONS = 50
SECONDS = 5
#: The ceiling and `serve` are loaded in turns, this many rounds of ROUND_SECONDS each: on a
#: machine others load too, the ratio of each round's pair is steadier than one long run
#: of each, measured a minute apart. The figures given are the medians of the rounds.
ROUNDS = 3
ROUND_SECONDS = 3
PATHS = ("/api/v1/offers", "/")
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:g}s")


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(number) * UNITS[unit]


def wrk(url: str, seconds: int = SECONDS) -> dict[str, Any]:
    """wrk's figures for `url` at CONNECTIONS in flight: req/s, p50, p99, max (ms), errors."""
    out = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency",
                          "--timeout", "30s", url], capture_output=True, text=True,
                         check=True).stdout
    pct = dict(re.findall(r"^\s+(\d+)%\s+(\S+)\s*$", out, re.M))
    if "99" not in pct:
        raise RuntimeError(f"wrk said:\n{out}")
    latency = re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    done = re.search(r"(\d+) requests in", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
            "p50": _ms(pct["50"]), "p99": _ms(pct["99"]),
            "max": _ms(latency.group(1)) if latency else float("nan"),
            "non_2xx": int(errors.group(1)) if errors else 0,
            "requests": int(done.group(1)) if done else 0,
            "socket_errors": socket_errors.group(1) if socket_errors else ""}


def _bodies(url: str) -> dict[str, tuple[str, list[tuple[str, str]], bytes]]:
    """Each path's answer as the app draws it (status, headers less the length, body)."""
    from gpuradar.scheduler.server import route
    from gpuradar.storage.db import get_engine

    engine = get_engine(url)
    app = route(lambda: engine, str)
    bodies = {}
    for path in PATHS:
        said: list[Any] = []
        body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": "GET", "QUERY_STRING": ""},
                            lambda status, headers, said=said: said.extend([status, headers])))
        bodies[path] = (said[0], [(k, v) for k, v in said[1] if k != "Content-Length"], body)
    return bodies


def _static_wsgi(url: str) -> Any:
    """A WSGI app sending the precomputed answers."""
    bodies = _bodies(url)

    def static(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        status, headers, body = bodies[environ["PATH_INFO"]]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]

    return static


def _read_wsgi() -> Any:
    """The read side's WSGI app (cached, read-only) over BENCH_DATABASE_URL: what a WSGI
    server would run in ReadApp's place."""
    import os

    from gpuradar.scheduler.server import read_app
    from gpuradar.storage.db import get_engine

    engine = get_engine(os.environ["BENCH_DATABASE_URL"])
    return read_app(lambda: engine, str).wsgi


def _static_wsgi_env() -> Any:
    import os

    return _static_wsgi(os.environ["BENCH_DATABASE_URL"])


def _server(kind: str, url: str, port: int) -> None:
    """The servers other than `gpuradar serve` (run as `python -m bench.serving KIND URL
    PORT`)."""
    from gpuradar.scheduler.server import ReadServer

    if kind == "wsgiref":
        from gpuradar.scheduler.health import serve
        from gpuradar.scheduler.server import route
        from gpuradar.scheduler.web import read_only
        from gpuradar.storage.db import get_engine

        engine = get_engine(url)
        serve("127.0.0.1", port, read_only(route(lambda: engine, str)))
        threading.Event().wait()
    elif kind == "static":
        bodies = {path: (int(status.split()[0]), [
            (k.lower().encode(), v.encode()) for k, v in
            [*headers, ("Content-Length", str(len(body)))]], body)
            for path, (status, headers, body) in _bodies(url).items()}

        async def static(scope: dict[str, Any], receive: Any, send: Any) -> None:
            status, headers, body = bodies[scope["path"]]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        ReadServer(static, "127.0.0.1", port).run()
    elif kind in ("waitress-static", "waitress-app"):
        import os

        from waitress import serve as waitress_serve

        os.environ["BENCH_DATABASE_URL"] = url
        waitress_serve(_static_wsgi(url) if kind == "waitress-static" else _read_wsgi(),
                       host="127.0.0.1", port=port, threads=4, _quiet=True)
    elif kind in ("granian-static", "granian-app"):
        import os

        from granian import Granian

        os.environ["BENCH_DATABASE_URL"] = url
        target = "_static_wsgi_env" if kind == "granian-static" else "_read_wsgi"
        Granian(f"bench.serving:{target}", address="127.0.0.1", port=port,
                interface="wsgi", workers=1, blocking_threads=4, factory=True,
                log_enabled=False).serve()


#: What Prometheus asks for.
SCRAPE_HEADERS = {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;"
                  "version=0.0.4;q=0.5,*/*;q=0.1", "Accept-Encoding": "gzip"}
SCRAPE_EVERY = 0.05


def _scrape(url: str, stop: threading.Event, times: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=SCRAPE_HEADERS),
                                    timeout=30) as r:
            r.read()
        times.append((time.perf_counter() - t0) * 1000)
        stop.wait(SCRAPE_EVERY)


def _scrapes(url: str, seconds: float) -> list[float]:
    """Scrape `url` for `seconds` without other load: each scrape's time (ms)."""
    times: list[float] = []
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    _scrape(url, stop, times)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"scrapes": len(times), "p50": statistics.median(times),
            "p99": times[min(len(times) - 1, int(len(times) * 0.99))], "max": times[-1]}


def measure() -> dict[str, Any]:
    """Every figure: {server: {path: wrk figures}}, and the daemon's /metrics under load."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        url, env, names = _replayed(tmp)
        out["offers"] = _offers(url)
        procs, bases = [], {}
        try:
            for kind in ("static", "serve", "wsgiref"):
                proc, bases[kind] = _start(kind, url, env)
                procs.append(proc)
            rounds: dict[str, dict[str, list[dict[str, float]]]] = {
                kind: {path: [] for path in PATHS} for kind in ("static", "serve")}
            for _ in range(ROUNDS):
                for path in PATHS:
                    for kind in ("static", "serve"):
                        rounds[kind][path].append(wrk(bases[kind] + path, ROUND_SECONDS))
            for kind, by_path in rounds.items():
                out[kind] = {path: _median(runs) for path, runs in by_path.items()}
            out["ratio"] = {path: statistics.median(
                s["rps"] / c["rps"] for s, c in zip(rounds["serve"][path],
                                                    rounds["static"][path], strict=True))
                for path in PATHS}
            out["wsgiref"] = {path: wrk(bases["wsgiref"] + path) for path in PATHS}
        finally:
            _stop(procs)
        out["metrics"] = _daemon_metrics(tmp, url, env, len(names))
    return out


def _replayed(tmp: str) -> tuple[str, dict[str, str], list[str]]:
    """Every shipped recording replayed into a new SQLite database: its URL, the
    environment of the processes that read it, the sources."""
    url = f"sqlite:///{tmp}/bench.db"
    env = {"GPURADAR_DATA_DIR": f"{tmp}/data", "GCP_API_KEY": "", "VAST_API_KEY": "",
           "PATH": "/usr/bin:/bin"}
    names = sorted(p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists())
    subprocess.run([sys.executable, "-m", "gpuradar", "crawl", *names, "--replay",
                    str(RECORDINGS), "--database-url", url], env=env, check=True,
                   capture_output=True, cwd=REPO)
    return url, env, names


def _start(kind: str, url: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """A server of `kind` (`serve`: `gpuradar serve`; else _server's) on a free port, once
    it answers: its process and base URL."""
    port = _port()
    args = ([sys.executable, "-m", "gpuradar", "serve", "--database-url", url,
             "--port", str(port)] if kind == "serve" else
            [sys.executable, "-m", "bench.serving", kind, url, str(port)])
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(base + "/")
    except RuntimeError:
        _stop([proc])
        raise
    return proc, base


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


#: The servers weighed for the read side (docs/architecture.md): precomputed bytes on each,
#: and the read app on each (`serve`: the one shipped, ReadApp on uvicorn; `waitress-app`:
#: the former, the WSGI app on waitress; `granian-app`: the WSGI app on granian).
CANDIDATES = ("static", "waitress-static", "granian-static", "serve", "waitress-app",
              "granian-app")


def candidates() -> dict[str, Any]:
    """Each candidate installed, loaded in turns (ROUNDS rounds of each path): the medians of
    its figures and of its ratio to `static` (uvicorn's ceiling) in the same round."""
    import importlib.util

    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    kinds = [k for k in CANDIDATES if k in ("static", "serve") or
             importlib.util.find_spec(k.split("-")[0]) is not None]
    with tempfile.TemporaryDirectory() as tmp:
        url, env, _ = _replayed(tmp)
        procs, bases = [], {}
        try:
            for kind in kinds:
                proc, bases[kind] = _start(kind, url, env)
                procs.append(proc)
            rounds: dict[str, dict[str, list[dict[str, float]]]] = {
                kind: {path: [] for path in PATHS} for kind in kinds}
            for _ in range(ROUNDS):
                for path in PATHS:
                    for kind in kinds:
                        rounds[kind][path].append(wrk(bases[kind] + path, ROUND_SECONDS))
        finally:
            _stop(procs)
    return {kind: {path: {**_median(runs), "of_static": statistics.median(
        r["rps"] / s["rps"] for r, s in zip(runs, rounds["static"][path], strict=True))}
        for path, runs in by_path.items()} for kind, by_path in rounds.items()}


#: Requests each server answers under callgrind per path and batch (`instructions`), and
#: the batches: the figure is the fewest instructions of a batch, as a batch that met the
#: page's redraw of a new minute (a wall-clock event) counts that draw too.
COUNTED = 400
BATCHES = 3


def _fire(url: str, count: int) -> None:
    """`count` GET requests of `url`, CONNECTIONS at once on keep-alive connections."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlsplit

    parts = urlsplit(url)

    def one_connection(requests: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
        for _ in range(requests):
            conn.request("GET", parts.path)
            reply = conn.getresponse()
            reply.read()
            if reply.status != 200:
                raise RuntimeError(f"{url}: {reply.status}")
        conn.close()

    with ThreadPoolExecutor(CONNECTIONS) as pool:
        list(pool.map(one_connection, [count // CONNECTIONS] * CONNECTIONS))


def instructions(kinds: tuple[str, ...] = ("static", "waitress-static", "serve",
                                           "waitress-app")) -> dict[str, Any]:
    """Instructions per answer of each server in `kinds` (installed), counted by callgrind
    while COUNTED requests of each path are answered, CONNECTIONS in flight (so that,
    unlike a time, the figure repeats on a loaded machine). Each server runs under
    valgrind; its start-up and a first request of each path (the draw) are not counted."""
    import glob
    import importlib.util

    kinds = tuple(k for k in kinds if k in ("static", "serve") or
                  importlib.util.find_spec(k.split("-")[0]) is not None)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        url, env, _ = _replayed(tmp)
        for kind in kinds:
            port = _port()
            args = (["-m", "gpuradar", "serve", "--database-url", url, "--port", str(port)]
                    if kind == "serve" else ["-m", "bench.serving", kind, url, str(port)])
            proc = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={tmp}/{kind}.%p", sys.executable, *args],
                env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base = f"http://127.0.0.1:{port}"
            out[kind] = {}
            try:
                _wait(base + "/", timeout=600)
                for path in PATHS:
                    _wait(base + path, timeout=120)  # drawn and cached before counting
                    counts = []
                    for _ in range(BATCHES):
                        for command in ("--zero", "--instr=on"):  # one a call
                            subprocess.run(["callgrind_control", command, str(proc.pid)],
                                           check=True, capture_output=True)
                        _fire(base + path, COUNTED)
                        for command in ("--dump", "--instr=off"):  # off first: dumps 0
                            subprocess.run(["callgrind_control", command, str(proc.pid)],
                                           check=True, capture_output=True)
                        newest = max(glob.glob(f"{tmp}/{kind}.{proc.pid}.*"),
                                     key=lambda f: int(f.rsplit(".", 1)[1]))
                        total = re.search(r"^(?:summary|totals): (\d+)",
                                          Path(newest).read_text(errors="replace"), re.M)
                        counts.append(int(total.group(1)) / COUNTED)  # type: ignore[union-attr]
                    out[kind][path] = min(counts)
            finally:
                _stop([proc])
    return out


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds."""
    return {k: statistics.median(r[k] for r in runs) if isinstance(runs[0][k], (int, float))
            else runs[0][k] for k in runs[0]}


def _offers(url: str) -> int:
    from gpuradar.storage.db import get_engine
    from gpuradar.storage.queries import current_offers

    return len(current_offers(get_engine(url)))


def _crawled(metrics_url: str) -> float:
    """The daemon's finished crawls so far (gpuradar_crawls_total, every source and status)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=30) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) if f.name ==
               "gpuradar_crawls" for s in f.samples if s.name == "gpuradar_crawls_total")


def _daemon_metrics(tmp: str, url: str, env: dict[str, str], sources: int
                    ) -> dict[str, Any]:
    """`gpuradar run --replay`: once its first crawl of each of `sources` has ended (they
    would load the machine too), /metrics scraped alone, then while wrk loads its page."""
    metrics_port, web_port = _port(), _port()
    config = Path(tmp) / "run.yaml"
    config.write_text(f"database_url: {url}\nmetrics: {{port: {metrics_port}}}\n"
                      f"web: {{port: {web_port}}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "gpuradar", "run", "--config", str(config),
                             "--replay", str(RECORDINGS), "--interval", "3600"],
                            env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        _wait(f"http://127.0.0.1:{metrics_port}/healthz")
        _wait(f"http://127.0.0.1:{web_port}/")
        deadline = time.monotonic() + 120
        while _crawled(metrics) < sources and time.monotonic() < deadline:
            time.sleep(0.2)
        alone = _summary(_scrapes(metrics, SECONDS))
        times: list[float] = []
        stop = threading.Event()
        scraper = threading.Thread(target=_scrape, args=(metrics, stop, times))
        scraper.start()
        page = wrk(f"http://127.0.0.1:{web_port}/")
        stop.set()
        scraper.join()
    finally:
        proc.terminate()
        proc.wait(60)
    return {"page_rps": page["rps"], "page_p99": page["p99"], "alone": alone,
            **_summary(times)}


def add_figures(figs: Any, size: dict) -> None:
    """The rows of `python -m bench` (targets: issue #54)."""
    m = measure()
    for path in PATHS:
        ceiling, serve, old = (m[k][path] for k in ("static", "serve", "wsgiref"))
        ratio = m["ratio"][path]
        name = f"`{path}` ({m['offers']} offers)" if path != "/" else "`/` (the page)"
        for kind, r in ((f"static bytes, same server (ceiling; median of {ROUNDS} rounds)",
                         ceiling),
                        (f"gpuradar serve ({ratio:.2f} x the ceiling, median of the rounds' "
                         f"ratios; {serve['rps'] / max(old['rps'], 1e-9):.0f} x former)",
                         serve), ("former in-daemon server", old)):
            timing = (f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, max {r['max']:.0f} ms"
                      if r["requests"] else f"no answer within {SECONDS} s")
            figs.add(f"{name} at {CONNECTIONS} in flight: {kind}; {timing}", r["rps"], None,
                     "printed" if r is not serve else
                     ">= 0.5 x ceiling, >= 10 x former, p99 <= 100 ms",
                     None if r is not serve else
                     ratio >= 0.5 and r["rps"] >= 10 * old["rps"] and r["p99"] <= 100,
                     "req/s")
    d = m["metrics"]
    alone = d["alone"]
    figs.add(f"daemon /metrics alone (p99 of {alone['scrapes']} scrapes; p50 "
             f"{alone['p50']:.1f} ms, max {alone['max']:.0f} ms)", alone["p99"], None,
             "printed", None, "ms")
    figs.add(f"daemon /metrics while its page (child process) takes {d['page_rps']:.0f} "
             f"req/s at {CONNECTIONS} in flight (p99 of {d['scrapes']} scrapes; p50 "
             f"{d['p50']:.1f} ms, max {d['max']:.0f} ms; {d['p99'] / alone['p99']:.1f}x "
             "alone)", d["p99"], None, "<= 50 ms", d["p99"] <= 50, "ms")


if __name__ == "__main__":
    if len(sys.argv) == 4:
        _server(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    else:
        import json

        print(json.dumps(instructions() if sys.argv[1:] == ["instructions"] else
                         candidates() if sys.argv[1:] == ["candidates"] else measure(),
                         indent=1))
