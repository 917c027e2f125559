"""Replayed data keeps the date it was captured (issue #32): a crawl answered from a
recording stores its observations at the recording's capture time, says it was replayed,
and is as stale to rules as its capture is old. On SQLite and PostgreSQL (migration 0007)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.alerts.engine import evaluate
from gpuradar.alerts.grammar import parse_rule
from gpuradar.core.items import PriceItem
from gpuradar.crawler.middlewares import Recording, capture_time
from gpuradar.storage import queries
from gpuradar.storage.ingest import CrawlWriter, Replay
from gpuradar.storage.queries import source_health

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AUGUST = datetime(2026, 8, 22, tzinfo=UTC)


def offer(instance: str, per_gpu: float, at: datetime = NOW) -> PriceItem:
    return PriceItem(source="vastai", region="US", instance_type=instance, pricing="on_demand",
                     gpu="H100-SXM-80GB", gpu_count=1, price=per_gpu, currency="USD",
                     available=True, observed_at=at, price_usd=per_gpu,
                     price_per_gpu_usd=per_gpu)


def crawl(engine, items, at: datetime = NOW, replay: Replay | None = None):
    writer = CrawlWriter(engine, "vastai", started_at=at, replay=replay)
    writer.add(items)
    return writer.finish("ok")


def test_a_replayed_crawl_dates_its_offers_at_the_capture_not_the_replay(engine):
    crawl(engine, [offer("59380", 1.7356)], replay=Replay("2026-08-22", AUGUST))
    (row,) = queries.current_offers(engine)
    # what `prices` (and its --csv/--json) shows: the capture, marked replayed
    assert row["observed_at"] == AUGUST and row["first_seen"] == AUGUST
    assert row["replayed"] is True and row["captured"] == "2026-08-22"
    (span,) = queries.spans(engine, row["id"])
    assert span["valid_from"] == AUGUST and span["seen_until"] == AUGUST
    assert span["replayed"] is True and span["captured"] == "2026-08-22"
    # the crawl itself ran now: that is when the source is next due
    assert queries.last_success(engine)["vastai"] == NOW
    assert queries.replayed_sources(engine, ["H100-SXM-80GB"]) == {"vastai": "2026-08-22"}


def test_a_live_crawl_is_not_marked_replayed(engine):
    crawl(engine, [offer("59380", 1.7356)])
    (row,) = queries.current_offers(engine)
    assert row["observed_at"] == NOW and row["replayed"] is False and row["captured"] is None
    assert queries.replayed_sources(engine) == {}


def test_replayed_data_from_august_is_stale_to_rules(engine):
    """Decision: freshness counts from what the data describes. The default `stale_after`
    (2 days) makes an August capture replayed in December stale: its offers neither fire
    nor resolve a rule. A fresh capture replayed at once fires as live data would."""
    crawl(engine, [offer("59380", 1.3867)], replay=Replay("2026-08-22", AUGUST))
    assert source_health(engine)["vastai"][0] == AUGUST
    rules = [parse_rule("H100 under $2/h", notify=("team",))]
    result = evaluate(engine, rules, now=NOW)
    assert result.firing == 0 and result.stale_sources == ["vastai"]
    # the same capture, judged on its own day, is fresh
    result = evaluate(engine, rules, now=AUGUST + timedelta(hours=1))
    assert result.firing == 1 and result.stale_sources == []


def test_a_replay_older_than_the_stored_data_is_refused_and_changes_nothing(engine):
    crawl(engine, [offer("59380", 1.50)])
    summary = crawl(engine, [offer("59380", 1.7356), offer("148199", 1.3867)],
                    at=NOW + timedelta(minutes=5), replay=Replay("2026-08-22", AUGUST))
    assert summary.status == "refused"
    assert "captured 2026-08-22, before the newest vastai data" in summary.error
    (row,) = queries.current_offers(engine)
    assert row["price"] == 1.50 and row["replayed"] is False
    assert len(queries.spans(engine, row["id"])) == 1


def test_a_refused_replay_is_no_failure_and_keeps_the_source_in_the_index(engine):
    """Refused three times, the replay changes neither the source's failures (rules, the
    index) nor the daemon's back-off: Vast.ai stays in the index."""
    from gpuradar.storage import index

    crawl(engine, [offer("59380", 1.50)])
    for n in range(3):
        summary = crawl(engine, [offer("59380", 1.7356)], at=NOW + timedelta(minutes=n + 1),
                        replay=Replay("2026-08-22", AUGUST))
        assert summary.status == "refused"
    assert source_health(engine)["vastai"] == (NOW, 0)
    assert queries.consecutive_failures(engine, "vastai") == 0
    index.update_index(engine, NOW + timedelta(minutes=5))
    (h100,) = index.current_index(engine)
    assert [v["source"] for v in h100["panel"]] == ["vastai"] and h100["median"] == 1.5


@pytest.mark.parametrize(("captured", "at"), [
    ("2026-08-22", datetime(2026, 8, 22, tzinfo=UTC)),
    ("2026-08", datetime(2026, 8, 1, tzinfo=UTC)),  # a month: its first instant
    ("2026-08-22T18:14:00Z", datetime(2026, 8, 22, 18, 14, tzinfo=UTC)),
    ("2026-08-22T20:14:00+02:00", datetime(2026, 8, 22, 18, 14, tzinfo=UTC)),
    ("last summer", None), ("", None), (None, None),
])
def test_capture_time_reads_the_provenance_date(captured, at):
    assert capture_time(captured) == at


def test_a_recording_without_a_stated_date_replays_as_date_unknown(tmp_path):
    (tmp_path / "vastai").mkdir()
    assert Recording(tmp_path, "vastai").replay() == Replay(None, None)
    (tmp_path / "vastai" / "provenance.json").write_text(json.dumps({"captured": "2026-08"}))
    assert Recording(tmp_path, "vastai").replay() == Replay(
        "2026-08", datetime(2026, 8, 1, tzinfo=UTC))


def test_an_undated_replay_is_marked_with_an_unknown_date(engine):
    crawl(engine, [offer("59380", 1.7356)], replay=Replay(None, None))
    (row,) = queries.current_offers(engine)
    assert row["replayed"] is True and row["captured"] is None
    assert row["observed_at"] == NOW  # stored at the replay, shown as "date unknown"


def test_the_replayed_sources_of_one_pricing_are_those_with_offers_of_it(engine):
    crawl(engine, [offer("59380", 1.7356)], replay=Replay("2026-08-22", AUGUST))
    assert queries.replayed_sources(engine, pricing="on_demand") == {"vastai": "2026-08-22"}
    assert queries.replayed_sources(engine, pricing="spot") == {}


def test_a_replayed_source_counts_for_the_pricing_of_its_offers_only(engine):
    """The "replayed" note of `gpuradar history --pricing spot` names the sources whose spot
    offers were replayed, not those replayed with on-demand offers only."""
    from dataclasses import replace

    crawl(engine, [offer("59380", 1.7356)], replay=Replay("2026-08-22", AUGUST))
    writer = CrawlWriter(engine, "runpod", started_at=NOW,
                         replay=Replay("2026-08", datetime(2026, 8, 1, tzinfo=UTC)))
    writer.add([replace(offer("H100 SXM", 2.69), source="runpod", pricing="spot")])
    writer.finish("ok")
    assert queries.replayed_sources(engine, pricing="on_demand") == {"vastai": "2026-08-22"}
    assert queries.replayed_sources(engine, pricing="spot") == {"runpod": "2026-08"}
    assert queries.replayed_sources(engine) == {"vastai": "2026-08-22", "runpod": "2026-08"}


def test_a_replay_captured_at_the_time_of_the_stored_data_is_stored(engine):
    """Only a capture older than what the database holds is refused: one of the same moment
    is not (its price replaces the one stored for that moment)."""
    crawl(engine, [offer("59380", 1.50)], at=AUGUST)
    summary = crawl(engine, [offer("59380", 1.7356)], replay=Replay("2026-08-22", AUGUST))
    assert (summary.status, summary.error) == ("ok", "")
    (row,) = queries.current_offers(engine)
    assert (row["price"], row["replayed"], row["observed_at"]) == (1.7356, True, AUGUST)


def test_only_the_sources_own_data_can_make_a_replay_too_old(engine):
    """A runpod recording from August is stored though aws and vastai (named before and
    after it) hold data from December: only runpod's own data could make it too old."""
    from dataclasses import replace

    for source in ("aws", "vastai"):
        writer = CrawlWriter(engine, source, started_at=NOW)
        writer.add([replace(offer("X", 2.0), source=source)])
        writer.finish("ok")
    writer = CrawlWriter(engine, "runpod", started_at=NOW + timedelta(minutes=5),
                         replay=Replay("2026-08-22", AUGUST))
    writer.add([replace(offer("H100 SXM", 2.69), source="runpod")])
    summary = writer.finish("ok")
    assert (summary.status, summary.error, summary.new_offers) == ("ok", "", 1)
    assert queries.replayed_sources(engine) == {"runpod": "2026-08-22"}
