"""Benchmark of `gpuradar run` (part of `python -m bench`; alone: `python -m bench.daemon`).

1. Memory: the daemon replays the shipped recordings of lambda, vastai and oci every second
   for CYCLES crawl cycles; its RSS (process_resident_memory_bytes from /metrics) is
   sampled all along. Reports start, peak and end RSS, and the trend over the second half.
2. Latency: RUNS fresh daemons each crawl once and notify a local webhook; the time from
   the end of the crawl that made the rule fire (crawl.finished_at) to the webhook's
   arrival is the time to hand the notification to apprise (and apprise to deliver it).

Each daemon is a `python -m gpuradar run` process of its own, as a user starts it, not a
fork of the test suite's fork server (whose preloaded libraries would count in its RSS).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.daemon_helpers import (
    Daemon,
    WebhookSink,
    copy_recordings,
    query,
    write_config,
)
from tests.helpers import free_port

SOURCES = ["lambda", "vastai", "oci"]


def migrated_db(path: Path) -> str:
    from gpuradar.storage.db import open_database

    url = f"sqlite:///{path}"
    open_database(url)
    return url


def memory(cycles: int, work: Path) -> dict:
    recordings = copy_recordings(work / "recordings", SOURCES)
    db_url = migrated_db(work / "mem.db")
    port = free_port()
    path = write_config(work / "mem.yaml", {
        "database_url": db_url, "rules": ["H100 under $100/h on vastai"],
        "targets": {"null": "json://127.0.0.1:9/"},  # nothing listens: retries, as in life
        "sources": {s: {"jitter": 0} for s in SOURCES},
        "daemon": {"watch_interval": 0, "misfire_grace": 5}})
    d = Daemon(work, path, "--replay", str(recordings), "--interval", "1",
               "--metrics-port", str(port), metrics_port=port, real=True)
    samples: list[tuple[float, float]] = []  # (cycles, RSS MB)
    try:
        d.wait_ready(60)
        started = time.monotonic()
        while True:
            m = d.metrics()
            done = min(m.get(("gpuradar_crawls_total", frozenset(
                {("source", s), ("status", "ok")})), 0) for s in SOURCES)
            rss = m[("process_resident_memory_bytes", frozenset())] / 2**20
            samples.append((done, rss))
            if done >= cycles:
                break
            time.sleep(2)
        elapsed = time.monotonic() - started
        assert d.stop() == 0
    finally:
        d.cleanup()
    half = [s for s in samples if s[0] >= cycles / 2]
    xs, ys = [s[0] for s in half], [s[1] for s in half]
    slope = statistics.linear_regression(xs, ys).slope * 100 if len(half) > 2 else 0.0
    failed = query(db_url, "SELECT COUNT(*) FROM crawl WHERE status != 'ok'")[0][0]
    marks = {}
    for done, rss in samples:  # RSS when each 50 cycles were reached
        marks.setdefault(int(done // 50) * 50, round(rss, 1))
    return {"cycles": cycles, "seconds": round(elapsed), "rss_by_cycle_mb": marks,
            "rss_start_mb": round(samples[0][1], 1),
            "rss_peak_mb": round(max(ys for _, ys in samples), 1),
            "rss_end_mb": round(samples[-1][1], 1),
            "trend_mb_per_100_cycles_second_half": round(slope, 2),
            "crawls_not_ok": failed}


def captured_today(recordings: Path) -> Path:
    """The copied recordings with today as their capture date. A replay's offers are dated
    at its capture (gpuradar/recordings: August 2026), and offers that old are stale: no
    price rule fires on them, so the latency run would wait for a notification forever."""
    import json

    for provenance in recordings.glob("*/provenance.json"):
        data = json.loads(provenance.read_text())
        data["captured"] = datetime.now(UTC).date().isoformat()
        provenance.write_text(json.dumps(data, indent=1))
    return recordings


def latency(runs: int, work: Path) -> dict:
    recordings = captured_today(copy_recordings(work / "recordings-lat", SOURCES))
    out = []
    with WebhookSink() as hook:
        for i in range(runs):
            arrivals: list[float] = []
            db_url = migrated_db(work / f"lat{i}.db")
            port = free_port()
            path = write_config(work / f"lat{i}.yaml", {
                "database_url": db_url, "rules": ["H100 under $100/h on vastai"],
                "targets": {"hook": hook.url}, "daemon": {"watch_interval": 0},
                "sources": {s: {"jitter": 0} for s in SOURCES}})
            before = len(hook.posts)
            d = Daemon(work, path, "--replay", str(recordings), "--metrics-port", str(port),
                       metrics_port=port, real=True)
            try:
                d.wait_ready(60)
                deadline = time.monotonic() + 120
                while len(hook.posts) == before:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no notification within 120 s (see {d.err_path})")
                    time.sleep(0.005)
                arrivals.append(time.time())
                assert d.stop() == 0
            finally:
                d.cleanup()
            finished = query(db_url, "SELECT MIN(finished_at) FROM crawl WHERE source = "
                             "'vastai' AND status = 'ok'")[0][0]
            if isinstance(finished, str):
                finished = datetime.fromisoformat(finished)
            if finished.tzinfo is None:
                finished = finished.replace(tzinfo=UTC)
            out.append(arrivals[0] - finished.timestamp())
    return {"runs": runs, "median_s": round(statistics.median(out), 3),
            "max_s": round(max(out), 3), "all_s": [round(x, 3) for x in out]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuradar-bench-"))
    try:
        print("latency:", latency(args.runs, work), flush=True)
        print("memory:", memory(args.cycles, work), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
