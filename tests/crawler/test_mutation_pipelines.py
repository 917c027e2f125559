"""What is stored, pinned where mutation testing (issue #23) found the suite silent: a price
comes back exactly as quoted, a multi-GPU offer keeps its whole price with a per-GPU price
of one over the count, a currency code is stored in capitals, and a crawl that lost a page
to an HTTP error Scrapy ignores (403/404, no retry) is not `ok` and closes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gpuradar.core.currency import FxTable
from gpuradar.core.items import PriceItem
from gpuradar.crawler.pipelines import normalize, validate
from gpuradar.storage import queries
from gpuradar.storage.ingest import CrawlWriter
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.provider_server import Reply, serve_standard

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def offer(price: float, count: float = 1, currency: str = "USD", **extra) -> PriceItem:
    return PriceItem(source="azure", region="eastus", instance_type=extra.pop("it", "X"),
                     pricing="on_demand", gpu="H100", gpu_count=count, price=price,
                     currency=currency, available=True, observed_at=T0, **extra)


@pytest.mark.parametrize("price", [2.01, 0.29, 98.32, 1.386741, 0.000001, 12345.678901])
def test_a_price_round_trips_exactly(engine, price):
    writer = CrawlWriter(engine, "azure", started_at=T0)
    writer.add([offer(price, price_usd=price, price_per_gpu_usd=price)])
    writer.finish("ok")
    (stored,) = queries.find_offer(engine, "azure", "X")
    assert stored["price"] == price  # exactly: never 2.009999
    (span,) = queries.spans(engine, stored["id"])
    assert span["price"] == price


def test_an_8_gpu_offer_keeps_its_whole_price_and_an_eighth_per_gpu():
    item = offer(7.600593, count=8)
    assert validate(item) is None and normalize(item, FxTable()) is None
    assert item.price == 7.600593 and item.price_usd == 7.600593
    assert item.price_per_gpu_usd == round(7.600593 / 8, 6)


def test_a_lower_case_currency_is_stored_in_capitals():
    item = offer(3.0, currency="eur")
    assert validate(item) is None
    assert item.currency == "EUR"
    assert normalize(item, FxTable({"EUR": (1.1, T0.date(), "ecb")})) is None
    assert item.price_usd == pytest.approx(3.3)


@pytest.mark.parametrize("price,reason", [(None, "no_price"), (True, "bad_price"),
                                          ("x", "bad_price"), (float("nan"), "bad_price"),
                                          (-1.0, "negative_price"), (0, "zero_price")])
def test_an_unreadable_price_is_never_stored(price, reason):
    assert validate(offer(price)) == reason


@pytest.mark.parametrize("count", [0, -1, -0.5])
def test_an_offer_without_a_positive_gpu_count_is_dropped_as_no_gpu(count):
    # The drop reason users see (crawl record, `gpuradar sources`): no_gpu, not a price one.
    assert validate(offer(3.0, count=count)) == "no_gpu"


@pytest.mark.parametrize("low,high,verdict", [(1.0, 1.0, None), (1.01, 2.0, "implausible_price"),
                                              (0.5, 0.99, "implausible_price")])
def test_the_plausible_range_includes_both_ends(low, high, verdict):
    item = offer(8.0, count=8)
    assert normalize(item, FxTable(), (low, high)) == verdict


@pytest.mark.parametrize("status", [403, 404])
def test_a_page_lost_to_an_ignored_http_error_closes_nothing(tmp_path, provider_server,
                                                             sqlite_url, status):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 1})
    first = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert first.returncode == 0, first.stderr
    before = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)

    from tests.routes.core import azure_handler
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(status, b"{}")
                          if "$skip" in req.query else azure_handler(req))
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    # Azure reads a region to the end of its chain before it yields (a meter's price in
    # effect may be on any page), so the lost second page of eastus loses that region, its
    # first page too; the other regions are stored and the crawl, partial (exit 4), closes
    # nothing.
    assert proc.returncode == 4, proc.stdout
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "partial" and result["closed"] == 0
    assert result["items"] == 13 - sum(o["region"] == "eastus" for o in before)
    assert f"HTTP {status}" in result["error"]
    after = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]


# How Vast.ai's search for other models is lost: its answer, the Scrapy settings, and what
# the crawl then says (exit code, status, a part of its error).
LOST_SEARCH = {
    "404": (Reply(404, b'{"detail": "not found"}'), {}, 4, "partial",
            "1 response(s) with HTTP 404"),
    "download timeout": (Reply(body=b"{}", delay=2.5), {"DOWNLOAD_TIMEOUT": 1}, 4, "partial",
                         "took longer than 1.0 seconds., {url}); its offers are missing from "
                         "this crawl"),  # the exception's own words, then the spider's
    # The spider sends a search only with 5 s of the budget left, so 5.5 s lets both start.
    "crawl time limit": (Reply(body=b"{}", delay=7), {"CLOSESPIDER_TIMEOUT": 5.5}, 1, "failed",
                         "crawl stopped early: closespider_timeout"),
}


@pytest.mark.parametrize("lost", LOST_SEARCH)
def test_a_lost_search_makes_the_crawl_incomplete_says_why_and_closes_nothing(
        tmp_path, provider_server, sqlite_url, lost):
    """Vast.ai's two searches: the one for other models answers 404 (no retry, no errback),
    or not within the download timeout, or not before the crawl's time limit (nothing is
    logged as an error then). The crawl is partial (the other search's offers are stored)
    or failed, its error says why, and the other models' offers stay open."""
    from tests.routes.core import vastai_handler

    reply, scrapy, code, status, error = LOST_SEARCH[lost]
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       sources={"vastai": {"request_interval": 0}},
                       scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 0, **scrapy})
    first = gpuradar("crawl", "vastai", "--json", config=cfg, db_url=sqlite_url)
    assert first.returncode == 0, first.stdout
    before = gpuradar_json("prices", "--source", "vastai", config=cfg, db_url=sqlite_url)

    def no_other_models(req):
        if "notin" in json.dumps((req.json() or {}).get("gpu_name")):
            return reply
        return vastai_handler(req)

    provider_server.route("POST", "/api/v0/bundles/", no_other_models)
    proc = gpuradar("crawl", "vastai", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == code, proc.stdout
    (result,) = json.loads(proc.stdout)
    assert result["status"] == status and result["closed"] == 0
    assert status == "failed" or result["items"] > 0
    assert error.format(url=f"{provider_server.base}/api/v0/bundles/") in result["error"]
    after = gpuradar_json("prices", "--source", "vastai", config=cfg, db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]


def test_a_storage_failure_at_the_end_of_a_crawl_is_reported_and_closes_nothing(
        tmp_path, provider_server, sqlite_url):
    """The database refuses the crawl's writes (a trigger standing in for a full disk): the
    crawl fails with the database's own words, and every stored offer stays as it was."""
    import sqlite3

    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    assert gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url).returncode == 0
    before = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    for table in ("offer", "price_change"):
        for event in ("INSERT", "UPDATE"):
            db.execute(f"CREATE TRIGGER refuse_{event}_{table} BEFORE {event} ON {table} "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    db.commit()
    db.close()
    from tests.routes.core import azure_handler
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(body=azure_handler(
        req).body.replace(b'"retailPrice": ', b'"retailPrice": 1')))  # every price changes
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr  # 3: the database
    (line,) = proc.stderr.strip().splitlines()
    assert line.endswith("is out of disk space: database or disk is full; the crawls were "
                         "stopped and closed nothing")
    (azure,) = [s for s in gpuradar_json("sources", config=cfg, db_url=sqlite_url)
                if s["source"] == "azure"]
    assert azure["last_status"] == "failed" and "storage error" in azure["last_error"]
    after = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert [(o["id"], o["price"]) for o in after] == [(o["id"], o["price"]) for o in before]


def test_a_spiders_error_reaches_its_own_crawl_result_as_written(tmp_path, provider_server,
                                                                 sqlite_url):
    """Lambda's page loses one tab's panel while Azure crawls in the same process: Lambda's
    crawl keeps the other tabs and is partial, its error is the spider's message with its
    values filled in (cut at 500 characters), and Azure's crawl is not touched by it. The
    site has no robots.txt (its 404 is asked first): no error of the crawl, not in its error."""
    from tests.routes.lambda_ import pricing_handler

    gone = "tabpanel-" + "x" * 600
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    provider_server.route("GET", "/pricing", lambda req: Reply(
        body=pricing_handler(req).body.replace(b'aria-controls="tabpanel-:island-adac26na8ba91'
                                               b'R19-R0:-0"', f'aria-controls="{gone}"'.encode()),
        content_type="text/html"))
    proc = gpuradar("crawl", "azure", "lambda", "--json", config=cfg, db_url=sqlite_url)
    results = {r["source"]: r for r in json.loads(proc.stdout)}
    assert results["azure"]["status"] == "ok" and results["azure"]["error"] == ""
    lam = results["lambda"]
    assert lam["status"] == "partial" and lam["closed"] == 0
    message = (f"lambda: {provider_server.base}/pricing: the 8x tab's panel {gone!r} is "
               "missing")
    assert message[:500] in lam["error"] and message[:501] not in lam["error"]
    assert lam["error"] == message[:500]  # nothing else: no "0 response(s) with HTTP 404"


def test_the_catalog_fills_in_the_memory_only_where_the_provider_gives_none():
    bare = offer(2.5, gpu_memory_gb=None)
    assert normalize(bare, FxTable()) is None and bare.gpu_memory_gb == 80
    stated = offer(2.5, gpu_memory_gb=79.6)  # as a provider in GiB rounding states it
    assert normalize(stated, FxTable()) is None and stated.gpu_memory_gb == 79.6


def test_an_offer_says_where_its_price_was_read_and_a_spiders_own_word_for_it_stands():
    """Azure's offers come from its price API; an offer whose spider says where its price
    was read (Lambda's pricing page, read without a key from a source whose API is the
    default) keeps what its spider said."""
    plain = offer(2.5)
    from_page = offer(2.5, attributes={"price_source": "list_page"})
    assert normalize(plain, FxTable()) is None and normalize(from_page, FxTable()) is None
    assert plain.attributes["price_source"] == "api"
    assert from_page.attributes["price_source"] == "list_page"


def test_a_multi_gpu_offer_says_what_links_its_gpus_and_a_single_gpu_offer_does_not():
    eight = offer(20.0, count=8, it="Standard_ND96isr_H100_v5")
    two = offer(7.0, count=2, it="Standard_NC80adis_H100_v5")
    one = offer(2.5, count=1, it="Standard_NC40ads_H100_v5")
    assert all(normalize(o, FxTable()) is None for o in (eight, two, one))
    assert two.attributes["interconnect"]["intra_node"] == "nvlink"  # the NVL pair's bridge
    assert eight.attributes["interconnect"] == {"intra_node": "nvswitch",
                                                "inter_node": "infiniband",
                                                "basis": "published"}
    assert "interconnect" not in one.attributes


def test_an_offer_a_stage_fails_on_is_reported_with_its_traceback_and_its_batch_goes_on(
        sqlite_url, caplog):
    """One offer of a batch makes a stage fail (a spider left its GPU count as text): the
    batch's other offers are stored, the crawl is partial and its error gives the failure in
    its own words, and the log shows that failure's traceback; the offer dropped beside it
    (no price) is logged without one."""
    import logging

    from gpuradar.core.items import PriceBatch
    from gpuradar.crawler.pipelines import ValidatePipeline
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
    good = offer(2.5, it="A")
    bad = offer(20.0, count="8", it="B")
    unpriced = offer(None, it="C")
    also_good = offer(3.5, it="D")
    with caplog.at_level(logging.DEBUG, logger="scrapy.core.scraper"):
        batch = ValidatePipeline(storage.crawler).process_item(
            PriceBatch([good, bad, unpriced, also_good]))
        assert batch.items == [good, also_good]  # in order
        storage.process_item(batch)
        storage.spider_closed(spider, "finished")

    summary = storage.summary
    assert summary.status == "partial" and summary.items == 2
    assert summary.error == (f"Error processing {bad}: '<=' not supported between instances "
                             "of 'str' and 'int'")[:500]
    assert caplog.text.count("Traceback (most recent call last)") == 1
    (failed,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert isinstance(failed.exc_info[1], TypeError) and failed.item is bad
    (dropped,) = [r for r in caplog.records if getattr(r, "item", None) is unpriced]
    assert dropped.exc_info is None and "no_price" in dropped.getMessage()


def opened_storage(spidercls: type, settings: dict) -> tuple:
    """(the storage pipeline, the spider) of a crawl of `spidercls` with Scrapy `settings`,
    its spider opened: as a crawl's start leaves them."""
    from scrapy.utils.test import get_crawler

    from gpuradar.crawler.pipelines import StoragePipeline

    crawler = get_crawler(spidercls, settings)
    crawler.spider = spider = crawler._create_spider()
    storage = StoragePipeline(crawler)
    storage.spider_opened(spider)
    return storage, spider


def test_a_spiders_error_lines_reach_its_crawl_as_logged(sqlite_url):
    """What a spider logs as an error is the crawl's error as a user reads it: the first line
    of a message, and no ": None" for a traceback asked for outside any exception."""
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
    storage.process_item(offer(2.5))
    spider.logger.error("eastus: the page has no prices\nits body: {}")
    spider.logger.error("westus: the answer was cut", exc_info=True)
    storage.spider_closed(spider, "finished")
    assert storage.summary.status == "partial"
    assert storage.summary.error == "eastus: the page has no prices; westus: the answer was cut"


def test_a_spiders_error_reaches_its_crawl_when_its_logger_does_not_propagate(sqlite_url):
    """The Vast.ai SDK, once imported, claims the logger "vastai" (its own handler,
    propagate off): the spider of that name still fails its crawl with its own line, once,
    and the logger is left as the package set it."""
    import logging

    from gpuradar.crawler.spiders.vastai import VastaiSpider

    claimed = logging.getLogger("vastai")
    saved = claimed.propagate, claimed.handlers[:]
    claimed.propagate, claimed.handlers[:] = False, [logging.NullHandler()]
    try:
        storage, spider = opened_storage(VastaiSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
        spider.logger.error("vastai: Vast refused the API key: HTTP 404 Invalid user key")
        storage.spider_closed(spider, "finished")
        assert len(claimed.handlers) == 1 and not claimed.propagate
    finally:
        claimed.propagate, claimed.handlers[:] = saved
    assert storage.summary.status == "failed", storage.summary
    assert storage.summary.error == "vastai: Vast refused the API key: HTTP 404 Invalid user key"


@pytest.mark.parametrize("missing", ["region", "instance_type"])
def test_an_offer_without_its_region_or_instance_type_is_dropped_as_no_identity(missing):
    # Either one missing is enough: such an offer cannot be told from another one.
    item = offer(3.0)
    setattr(item, missing, "")
    assert validate(item) == "no_identity"


def test_a_crawl_that_never_reached_storage_reports_nothing_stored():
    """`gpuradar crawl --json` for a crawl that failed before storage opened: failed, why,
    and every count zero (CrawlSummary's defaults), nothing dropped or unknown."""
    from types import SimpleNamespace

    from gpuradar.crawler.runner import TrackedCrawl

    crawler = SimpleNamespace(signals=SimpleNamespace(connect=lambda *a, **k: None), stats=None)
    tracked = TrackedCrawl("azure", crawler)
    tracked.failed_to_start(ValueError("bad setting"))
    assert vars(tracked.result()) == {
        "crawl_id": None, "source": "azure", "status": "failed",
        "error": "crawl did not start: ValueError: bad setting", "items": 0, "new_offers": 0,
        "changed": 0, "closed": 0, "dropped": {}, "unknown_gpus": [], "duration_s": 0.0,
        "changed_offer_ids": set(), "uncatalogued": {}, "unreadable": 0, "held": 0,
        "backfilled": None}


def test_back_dated_prices_at_either_end_of_the_plausible_range_are_stored(sqlite_url):
    """A back-dated price is judged per GPU against the source's plausible range as a live
    one is, both ends included: of an 8-GPU offer's history in a $0.50-$4 range, $4 and $32
    are stored, $3.92 and $32.08 (a cent per GPU outside) are counted as refused."""
    from gpuradar.core.backfill import PriceHistory
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url,
                                                   "GPURADAR_PRICE_RANGE": [0.5, 4.0]})
    live = offer(16.0, count=8, price_usd=16.0, price_per_gpu_usd=2.0)
    day, now = 86400, int(T0.timestamp())
    storage.process_item(live)
    storage.process_item(PriceHistory("azure", live.key, 8, "USD", [
        (now - 4 * day, 3.92), (now - 3 * day, 4.0), (now - 2 * day, 32.0),
        (now - day, 32.08)], 90, unreadable=3))
    storage.spider_closed(spider, "finished")
    done = storage.summary.backfilled
    assert (done.points, done.refused) == (2, 5)  # with the 3 the answer gave unreadable
    (stored,) = queries.find_offer(storage.engine, "azure", "X")
    assert [s["price"] for s in queries.spans(storage.engine, stored["id"])] == [4.0, 32.0, 16.0]


@pytest.mark.parametrize("gpus, currency", [(0, "USD"), (8, "EUR")])
def test_back_dated_prices_of_no_gpus_or_not_in_usd_are_refused(sqlite_url, gpus, currency):
    """The range is in USD per GPU: a history in another currency, or of an offer of no GPUs,
    cannot be judged against it, so none of its prices is stored; the crawl goes on."""
    from gpuradar.core.backfill import PriceHistory
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
    live = offer(16.0, count=8, price_usd=16.0, price_per_gpu_usd=2.0)
    now = int(T0.timestamp())
    storage.process_item(live)
    storage.process_item(PriceHistory("azure", live.key, gpus, currency,
                                      [(now - 86400, 12.0), (now - 3600, 14.0)], 90))
    storage.spider_closed(spider, "finished")
    summary = storage.summary
    assert (summary.status, summary.items, summary.backfilled.points,
            summary.backfilled.refused) == ("ok", 1, 0, 2)


def test_back_dated_prices_whose_currency_was_read_from_an_answer_are_stored(sqlite_url):
    """A history's currency as a provider's JSON states it (a string made while reading the
    answer, not this code's own literal) is USD when it reads "USD": its prices are stored."""
    from gpuradar.core.backfill import PriceHistory
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
    live = offer(16.0, count=8, price_usd=16.0, price_per_gpu_usd=2.0)
    now = int(T0.timestamp())
    stated = json.loads('{"currencyCode": "USD"}')["currencyCode"]
    storage.process_item(live)
    storage.process_item(PriceHistory("azure", live.key, 8, stated,
                                      [(now - 86400, 12.0), (now - 3600, 14.0)], 90))
    storage.spider_closed(spider, "finished")
    done = storage.summary.backfilled
    assert (done.points, done.refused) == (2, 0)
    (stored,) = queries.find_offer(storage.engine, "azure", "X")
    assert [s["price"] for s in queries.spans(storage.engine, stored["id"])] == [12.0, 14.0, 16.0]


def test_a_crawl_without_back_dated_prices_reports_no_back_fill(sqlite_url):
    """Only a crawl that read back-dated prices (AWS's first crawl of a region) says what it
    back-filled; any other crawl's summary has nothing to say of it (no "back-filled 0
    points" line under `gpuradar crawl`, `backfilled: null` in its JSON)."""
    from gpuradar.crawler.spiders.azure import AzureSpider

    storage, spider = opened_storage(AzureSpider, {"GPURADAR_DATABASE_URL": sqlite_url})
    storage.process_item(offer(2.5))
    storage.spider_closed(spider, "finished")
    assert (storage.summary.status, storage.summary.items) == ("ok", 1)
    assert storage.summary.backfilled is None


def test_an_offer_listed_twice_in_a_refused_replay_is_still_dropped_as_a_duplicate(sqlite_url):
    """A replay older than the stored data stores nothing, yet its offers are judged as a
    crawl's are: one listed a second time, batches apart, is dropped as a duplicate."""
    from datetime import timedelta

    from scrapy.exceptions import DropItem

    from gpuradar.crawler.spiders.azure import AzureSpider
    from gpuradar.storage.db import open_database

    stored = CrawlWriter(open_database(sqlite_url), "azure", started_at=T0)
    stored.add([offer(2.5, price_usd=2.5, price_per_gpu_usd=2.5)])
    stored.finish("ok")
    storage, spider = opened_storage(AzureSpider, {
        "GPURADAR_DATABASE_URL": sqlite_url, "GPURADAR_BATCH_SIZE": 1,
        "GPURADAR_STAGED": {"at": T0 - timedelta(days=1), "captured": "2026-10-31"}})
    storage.process_item(offer(3.0, it="A", price_usd=3.0, price_per_gpu_usd=3.0))
    storage.process_item(offer(3.0, it="B", price_usd=3.0, price_per_gpu_usd=3.0))
    with pytest.raises(DropItem, match="duplicate_offer: azure eastus A on_demand"):
        storage.process_item(offer(3.0, it="A", price_usd=3.0, price_per_gpu_usd=3.0))
    storage.spider_closed(spider, "finished")
    assert storage.summary.status == "refused"
