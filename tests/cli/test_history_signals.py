"""`gpuradar history SOURCE INSTANCE` shows a spot offer's interruption signal over time
beside its prices, and `--signals` that series alone (issue #51), from two crawls of the
real AWS Spot Advisor capture (the second with the band moved)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tests.clirun import gpuradar, gpuradar_json
from tests.storage.test_signal_series import ADVISOR, T0, aws_items, crawl, moved

P5 = ("aws", "p5.48xlarge", "--region", "us-east-1")


@pytest.fixture
def two_bands(sqlite_url):
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    crawl(engine, "aws", aws_items(ADVISOR, "2025-06-28", T0), T0)
    later = T0 + timedelta(days=2)
    crawl(engine, "aws", aws_items(moved(0), "2025-07-05", later), later)
    engine.dispose()
    return sqlite_url


def test_history_shows_the_signals_changes_beside_the_prices(two_bands):
    proc = gpuradar("history", *P5, "--pricing", "spot", db_url=two_bands,
                    env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "p5.48xlarge spot: interruption signal" in out
    assert re.search(r"2026-12-01 12:00\s+2026-12-03 12:00\s+interruption >20%/month "
                     r"\(AWS Spot Advisor, 2025-06-28\)\s+high", out), out
    assert re.search(r"2026-12-03 12:00\s+latest\s+interruption <5%/month "
                     r"\(AWS Spot Advisor, 2025-07-05\)\s+low", out), out


def test_signals_view_as_json_and_an_offer_without_one_is_unknown(two_bands):
    points = gpuradar_json("history", *P5, "--pricing", "spot", "--signals", db_url=two_bands)
    assert [(p["band"], p["as_of"], p["valid_from"], p["valid_to"]) for p in points] == [
        (">20%", "2025-06-28", "2026-12-01T12:00:00Z", "2026-12-03T12:00:00Z"),
        ("<5%", "2025-07-05", "2026-12-03T12:00:00Z", None)]
    # the capture gives no band for g6f.xlarge in us-east-1: unknown, not a default
    proc = gpuradar("history", "aws", "g6f.xlarge", "--region", "us-east-1", "--pricing",
                    "spot", "--signals", db_url=two_bands)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "aws us-east-1 g6f.xlarge spot: none stored (unknown)"


def test_the_python_api_gives_the_same_series(two_bands):
    import gpuradar

    with gpuradar.open(two_bands) as store:
        [offer] = [o for o in store.offers("H100", pricing="spot", source="aws")
                   if (o.region, o.instance_type) == ("us-east-1", "p5.48xlarge")]
        points = store.signals(offer.id)
        assert [(p.band, p.as_of, p.risk, p.valid_to) for p in points] == [
            (">20%", "2025-06-28", "high", T0 + timedelta(days=2)),
            ("<5%", "2025-07-05", "low", None)]
        assert isinstance(points[0], gpuradar.SignalPoint)
        assert list(store.signals(10**9)) == []  # no such offer: nothing stored
        with pytest.raises(ValueError, match="offer_id must be a whole number"):
            store.signals(-1)


def test_a_replayed_crawl_stores_the_demos_bands_as_the_series_start(sqlite_url):
    """Through the whole crawl (Scrapy, the pipelines, the writer): the AWS recording the
    demo replays gives each banded spot offer its first point, dated at the capture."""
    from pathlib import Path

    import gpuradar as package

    recordings = Path(package.__file__).parent / "recordings"
    for _ in range(2):  # the same capture again: nothing more
        proc = gpuradar("crawl", "aws", "--replay", str(recordings), db_url=sqlite_url)
        assert proc.returncode == 0, proc.stderr
    points = gpuradar_json("history", *P5, "--pricing", "spot", "--signals", db_url=sqlite_url)
    assert [(p["band"], p["as_of"], p["source"], p["valid_to"]) for p in points] == [
        (">20%", "2025-06-28", "AWS Spot Advisor", None)]
    assert points[0]["valid_from"].startswith("2026-08-09")  # the recording's capture


def test_vastais_host_reliability_is_shown_as_not_a_series(sqlite_url):
    """A score read with each offer is not a published rate: said, not stored as one."""
    from pathlib import Path

    import gpuradar as package

    recordings = Path(package.__file__).parent / "recordings"
    proc = gpuradar("crawl", "vastai", "--replay", str(recordings), db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    proc = gpuradar("history", "vastai", "59380:1xH100_SXM", "--pricing", "spot",
                    db_url=sqlite_url, env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert ("59380:1xH100_SXM spot: interruption signal: not kept as a series (host "
            "reliability score") in proc.stdout
    assert gpuradar_json("history", "vastai", "59380:1xH100_SXM", "--pricing", "spot",
                         "--signals", db_url=sqlite_url) == []
