"""The market index as a reference rate (issue #48), on the shipped real captures: each
point's panel, the minimum panel, the published figures recomputed by hand from
`prices --json` with the method docs/index.md states, and `gpuradar index reproduce`."""

from __future__ import annotations

import json
import statistics
from datetime import datetime

import pytest

from tests.clirun import gpuradar, gpuradar_json

MIN_PANEL, STALE_AFTER = 3, 2 * 86400


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("index") / "demo.db"
    proc = gpuradar("demo", "--keep", str(path))
    assert proc.returncode == 0, proc.stderr
    return f"sqlite:///{path}"


def quantile(values: list[float], q: float) -> float:
    """Type 7, as a spreadsheet's PERCENTILE.INC (independent of the code under test)."""
    return statistics.quantiles(values, n=10, method="inclusive")[round(q * 10) - 1] \
        if len(values) > 1 else values[0]


def test_no_point_is_the_market_below_the_minimum_panel_and_each_names_its_panel(demo):
    figures = gpuradar_json("prices", "--index", db_url=demo)
    assert figures
    for f in figures:
        kept = [v for v in f["panel"] if not v["reason"]]
        assert f["providers"] == len(kept) == len({v["source"] for v in kept})
        assert f["status"] == ("market" if len(kept) >= MIN_PANEL else "thin"), f
    shown = gpuradar("prices", "--index", db_url=demo).stdout
    assert "providers voted" in shown and "thin" in shown
    assert f"fewer than {MIN_PANEL} providers is thin" in " ".join(shown.split())


@pytest.mark.parametrize("family", ["H100", "A100", "L4"])
def test_published_points_recomputed_by_hand_from_prices_json(demo, family):
    """For every point in force of the model: the sources whose data is within 2 days of the
    point's date vote with their cheapest available offer; median, p10, p90 of the votes."""
    offers = gpuradar_json("prices", "--gpu", family, "--all", "--limit", "0", db_url=demo)
    figures = gpuradar_json("prices", "--index", "--gpu", family, db_url=demo)
    assert figures
    for f in figures:
        gpu = f["gpu"]
        at = datetime.fromisoformat(f["since"]).timestamp()
        votes: dict[str, float] = {}
        for o in offers:
            seen = datetime.fromisoformat(o["observed_at"]).timestamp()
            if (o["gpu"], o["pricing"]) == (gpu, f["pricing"]) and o["active"] \
                    and o["available"] is not False and abs(at - seen) <= STALE_AFTER:
                votes[o["source"]] = min(votes.get(o["source"], 1e9), o["price_per_gpu_usd"])
        assert sorted(votes) == sorted(v["source"] for v in f["panel"])
        kept = sorted(p for s, p in votes.items()
                      if not next(v for v in f["panel"] if v["source"] == s)["reason"])
        assert f["median"] == round(statistics.median(kept), 6)
        assert (f["p10"], f["p90"]) == (round(quantile(kept, 0.1), 6),
                                        round(quantile(kept, 0.9), 6))


def test_the_demo_market_point_of_same_day_captures_recomputed_by_hand(demo):
    """H100 on-demand of 2026-08-01, the captures of that month (Azure, Lambda, RunPod and
    more): the last same-day capture's point corrects the first, and is the market."""
    from datetime import UTC

    import gpuradar

    history = gpuradar.open(demo).index_history("H100-SXM-80GB", "on-demand",
                                                since=datetime(2026, 7, 1, tzinfo=UTC))
    point = [p for p in history if f"{p.since:%Y-%m-%d}" == "2026-08-01"][-1]
    assert point.status == "market" and f"{point.corrects:%Y-%m-%d %H:%M:%S}" == (
        "2026-08-01 00:00:00")
    offers = gpuradar_json("prices", "--gpu", "H100-SXM-80GB", "--pricing", "on-demand",
                           "--all", db_url=demo)
    votes: dict[str, float] = {}
    for o in offers:
        if o["observed_at"].startswith("2026-08-01"):
            votes[o["source"]] = min(votes.get(o["source"], 1e9), o["price_per_gpu_usd"])
    assert sorted(votes) == sorted(v["source"] for v in point.panel)
    assert len(votes) >= MIN_PANEL
    kept = sorted(p for s, p in votes.items()
                  if not next(v for v in point.panel if v["source"] == s)["reason"])
    assert (point.median, point.p10, point.p90) == (
        round(statistics.median(kept), 6), round(quantile(kept, 0.1), 6),
        round(quantile(kept, 0.9), 6))
    lam = next(v for v in point.panel if v["source"] == "lambda")
    assert lam["offer_id"] in {o["id"] for o in offers if o["source"] == "lambda"
                               and o["price_per_gpu_usd"] == 3.99}


def test_index_reproduce_says_equal_then_names_a_point_whose_price_changed(demo, tmp_path):
    out = tmp_path / "export"
    assert gpuradar("export", str(out), "--format", "csv,jsonl", db_url=demo).returncode == 0
    proc = gpuradar("index", "reproduce", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every point equal" in proc.stdout
    # the kept vote of a point in force (L4 on-demand: AWS's cheapest), its price changed
    (point,) = gpuradar_json("prices", "--index", "--gpu", "L4", "--pricing", "on-demand",
                             db_url=demo)
    voter = next(v["offer_id"] for v in point["panel"] if not v["reason"])
    path = out / "offers.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        if r["id"] == voter:
            r["price_per_gpu_usd"] = round(r["price_per_gpu_usd"] * 0.5, 6)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = gpuradar("index", "reproduce", str(out))
    assert proc.returncode == 1
    assert f"does not reproduce: L4 on_demand at {point['since'][:10]}" in proc.stdout


def test_index_reproduce_of_a_directory_without_an_export_is_one_line(tmp_path):
    proc = gpuradar("index", "reproduce", str(tmp_path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{tmp_path}: no index.jsonl or index.csv" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_replayed_capture_is_dated_at_its_capture_in_index_history(engine):
    from datetime import UTC

    from gpuradar.storage.ingest import CrawlWriter, Replay
    from tests.scheduler.test_api import get, served
    from tests.storage.test_index import item

    captured = datetime(2026, 9, 15, tzinfo=UTC)
    writer = CrawlWriter(engine, "vastai", replay=Replay("2026-09-15", captured))
    writer.add([item("vastai", "59380", 1.7356, at=captured)])
    assert writer.finish("ok").status == "ok"
    with served(lambda: engine) as base:
        status, _, body = get(f"{base}/api/v1/index/history?since=2026-09-01"
                              "&until=2026-10-01")
    assert status == 200
    (point,) = json.loads(body)["points"]
    assert (point["gpu"], point["since"], point["median"]) == (
        "H100-SXM-80GB", "2026-09-15T00:00:00Z", 1.7356)
    assert point["status"] == "thin" and point["panel"][0]["source"] == "vastai"




def test_hourly_and_daily_closes_publish_gaps_as_gaps(engine):
    """The fixed cadence beside the change points: before the first point a gap; then the
    point in force at each close; once its data is older than stale_after (no crawl came
    since), a gap again, not the last figure carried on."""
    from datetime import UTC

    from tests.scheduler.test_api import get, served
    from tests.storage.test_index import crawl, item

    t0 = datetime(2026, 11, 1, 12, 30, tzinfo=UTC)
    for source, price in (("aws", 2.0), ("azure", 3.0), ("lambda", 4.0)):
        crawl(engine, source, [item(source, "A", price, at=t0)], t0)
    with served(lambda: engine) as base:
        status, _, body = get(f"{base}/api/v1/index/closes?gpu=H100-SXM-80GB&cadence=hour"
                              "&since=2026-11-01T10:00:00Z&until=2026-11-01T14:00:00Z")
        assert status == 200, body
        hours = json.loads(body)["closes"]
        assert [(c["at"], c["status"], c["median"]) for c in hours] == [
            ("2026-11-01T11:00:00Z", "gap", None), ("2026-11-01T12:00:00Z", "gap", None),
            ("2026-11-01T13:00:00Z", "market", 3.0), ("2026-11-01T14:00:00Z", "market", 3.0)]
        # three crawls dated 12:30: the third's point corrects the first's, a second later each
        assert hours[2]["point"] == "2026-11-01T12:30:02Z" and len(hours[2]["digest"]) == 64
        status, _, body = get(f"{base}/api/v1/index/closes?gpu=H100-SXM-80GB&cadence=day"
                              "&since=2026-11-01&until=2026-11-05")
        days = json.loads(body)["closes"]
        # closes at each midnight: the day before's; two days after the data: a gap
        assert [(c["at"][:10], c["status"]) for c in days] == [
            ("2026-11-02", "market"), ("2026-11-03", "market"), ("2026-11-04", "gap"),
            ("2026-11-05", "gap")]
        status, _, body = get(f"{base}/api/v1/index/closes?cadence=week")
        assert status == 400 and b"cadence must be hour or day, not 'week'" in body
        status, _, body = get(f"{base}/api/v1/index/closes?cadence=hour&days=400")
        assert status == 400 and b"hourly closes asked for; at most 9000" in body
