"""The evaluation's market after crawls (alerts.market.Market.refresh): whether it reads back
only the offers a crawl of this process wrote or every offer of the source, it holds what a
fresh read of the store holds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.alerts.engine import Evaluator, read_market
from gpuradar.alerts.grammar import parse_rule
from gpuradar.core.items import PriceItem
from gpuradar.storage import ingest
from gpuradar.storage.ingest import CrawlWriter

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
RULES = [parse_rule("H100 under $3/h", name="h100"), parse_rule("A100 under $2/h", name="a100")]


def offer(source: str, instance: str, per_gpu: float, *, gpu: str = "H100-SXM-80GB",
          available: bool | None = True, usd: float = 1.0) -> PriceItem:
    price = per_gpu * 8
    return PriceItem(source=source, region="r1", instance_type=instance, pricing="on_demand",
                     gpu=gpu, gpu_count=8, price=price, currency="USD", available=available,
                     price_usd=price * usd, price_per_gpu_usd=per_gpu * usd)


def crawl(engine, source: str, items: list[PriceItem], at: datetime) -> None:
    writer = CrawlWriter(engine, source, started_at=at)
    writer.add([replace(i, observed_at=at) for i in items])
    writer.finish("ok")


def held(evaluator: Evaluator) -> dict[int, tuple]:
    return {oid: tuple(o) for oid, o in evaluator.market.offers.items()}


def stored(engine, at: datetime) -> dict[int, tuple]:
    return {oid: tuple(o) for oid, o in read_market(engine, at).offers.items()}


@pytest.mark.parametrize("written_known", [True, False])
def test_the_market_after_each_crawl_is_the_stored_one(engine, written_known):
    """Prices move, offers appear, close and become unavailable, a detail changes (its USD
    price): after each crawl the evaluation holds exactly the stored offers, whether it
    reads back only what this process's crawl wrote or (the crawl stored elsewhere)
    every offer of the source, and its rules match the same."""
    steps = [
        ("lambda", [offer("lambda", "A", 2.0), offer("lambda", "B", 2.5),
                    offer("lambda", "C", 1.5, gpu="A100-SXM-80GB")]),
        ("azure", [offer("azure", "X", 2.8)]),
        ("lambda", [offer("lambda", "A", 2.2), offer("lambda", "B", 2.5),
                    offer("lambda", "D", 1.9, gpu="A100-SXM-80GB")]),   # C closed, D new
        ("lambda", [offer("lambda", "A", 2.2, available=False), offer("lambda", "B", 2.5),
                    offer("lambda", "D", 1.9, gpu="A100-SXM-80GB")]),
        ("lambda", [offer("lambda", "A", 2.2), offer("lambda", "B", 2.5, usd=1.1),  # a detail
                    offer("lambda", "D", 1.9, gpu="A100-SXM-80GB")]),
        ("lambda", [offer("lambda", "A", 2.2), offer("lambda", "B", 2.5, usd=1.1),
                    offer("lambda", "D", 1.9, gpu="A100-SXM-80GB")]),   # nothing changed
    ]
    evaluator = Evaluator(engine)
    at = T0
    for k, (source, items) in enumerate(steps):
        at += timedelta(minutes=10)
        crawl(engine, source, items, at)
        if not written_known:  # as if another process had stored the crawl
            ingest.WRITTEN.get(engine).clear()
        result = evaluator.evaluate(RULES, now=at + timedelta(minutes=1))
        assert held(evaluator) == stored(engine, at + timedelta(minutes=1)), k
        best = {name: m.best for name, m in result.matches.items()}
        fresh = Evaluator(engine).evaluate(RULES, now=at + timedelta(minutes=1))
        assert best == {name: m.best for name, m in fresh.matches.items()
                        if name in best}, k
    assert {o.instance_type: o.price_usd for o in evaluator.market.offers.values()} == {
        "A": 2.2 * 8, "B": 2.5 * 8 * 1.1, "D": 1.9 * 8, "X": 2.8 * 8}


def test_only_a_crawl_of_this_process_that_follows_the_one_seen_is_trusted(engine):
    """What a crawl wrote stands for every change only when the reader saw the crawl just
    before it, finished; else (another crawl between, one still running, one stored by
    another process) the whole source is read again."""
    crawl(engine, "lambda", [offer("lambda", "A", 2.0)], T0)
    writer = CrawlWriter(engine, "lambda", started_at=T0 + timedelta(minutes=10))
    writer.add([offer("lambda", "A", 2.1)])
    first = writer.crawl_id
    writer.finish("ok")
    ids = ingest.WRITTEN.get(engine)["lambda"].offer_ids
    assert ids is not None and len(ids) == 1
    before = (first - 1, "ok")
    assert ingest.written_since(engine, "lambda", before, (first, "ok")) == ids
    assert ingest.written_since(engine, "lambda", (first - 1, "running"), (first, "ok")) is None
    assert ingest.written_since(engine, "lambda", (first - 2, "ok"), (first, "ok")) is None
    assert ingest.written_since(engine, "lambda", before, (first + 1, "ok")) is None
    assert ingest.written_since(engine, "azure", before, (first, "ok")) is None
    assert ingest.written_since(engine, "lambda", None, (first, "ok")) is None
