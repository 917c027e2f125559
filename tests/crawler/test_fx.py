"""FX: ECB reference rates stored by date; conversion uses the latest; the built-in table
is a loud last resort."""

from __future__ import annotations

import logging
from datetime import date

import pytest

from gpuradar.core.currency import FxTable
from gpuradar.core.items import PriceItem
from gpuradar.crawler.pipelines import normalize
from gpuradar.storage.queries import latest_fx, store_fx


def cny_item(price: float = 2.72) -> PriceItem:
    return PriceItem(source="autodl", region="west-B", instance_type="m1", pricing="on_demand",
                     gpu="RTX 4090", gpu_count=1, price=price, currency="CNY")


def test_latest_stored_rate_converts(engine):
    store_fx(engine, {"CNY": 0.14, "EUR": 1.10}, date(2026, 11, 26))
    store_fx(engine, {"CNY": 1.1562 / 8.1871, "EUR": 1.1562}, date(2026, 11, 27))
    rates = latest_fx(engine)
    assert rates["CNY"][1] == date(2026, 11, 27)
    item = cny_item()
    assert normalize(item, FxTable(rates)) is None
    assert item.price_usd == pytest.approx(2.72 * 1.1562 / 8.1871, rel=1e-6)
    assert item.price == 2.72 and item.currency == "CNY"  # the quoted price is kept
    assert item.gpu == "RTX-4090"
    # Re-storing a date replaces its rate instead of duplicating it.
    store_fx(engine, {"CNY": 0.15}, date(2026, 11, 27))
    assert latest_fx(engine)["CNY"][0] == 0.15


def test_fallback_rate_is_used_with_a_warning(caplog):
    item = cny_item()
    with caplog.at_level(logging.WARNING):
        assert normalize(item, FxTable({})) is None
    assert item.price_usd is not None
    assert "built-in fallback" in caplog.text and "gpuradar crawl fx" in caplog.text


def test_unknown_currency_is_dropped():
    item = cny_item()
    item.currency = "XYZ"
    assert normalize(item, FxTable({})) == "unknown_currency"


def test_a_day_of_ecb_rates_without_usd_is_reported_and_the_other_days_are_stored(engine,
                                                                                   db_url):
    """The ECB's rates are per euro; a day that lacks the USD rate cannot be converted to
    USD: the crawl says so, and the days before and after it are stored all the same. A
    currency worth more than a euro (under 1 per EUR) is stored like any other; a rate of
    zero is no rate."""
    from scrapy.utils.test import get_crawler

    from gpuradar.core.items import FxRateItem
    from gpuradar.crawler.pipelines import StoragePipeline
    from gpuradar.crawler.spiders.fx import FxSpider

    crawler = get_crawler(FxSpider, {"GPURADAR_DATABASE_URL": db_url})
    crawler.spider = spider = crawler._create_spider()
    storage = StoragePipeline(crawler)
    storage.spider_opened(spider)
    for currency, per_eur, day in (("USD", 1.16, "2026-11-25"), ("CNY", 8.2, "2026-11-25"),
                                   ("CNY", 8.1, "2026-11-26"), ("USD", 1.17, "2026-11-27"),
                                   ("CNY", 8.3, "2026-11-27"), ("GBP", 0.87, "2026-11-27"),
                                   ("JPY", 0.0, "2026-11-27")):
        storage.process_item(FxRateItem(currency=currency, per_eur=per_eur, rate_date=day))
    storage.spider_closed(spider, "finished")
    assert storage.summary.error == "ECB rates of 2026-11-26 have no USD rate"
    rates = latest_fx(engine)
    assert rates["CNY"][:2] == (pytest.approx(1.17 / 8.3), date(2026, 11, 27))
    assert rates["GBP"][:2] == (pytest.approx(1.17 / 0.87), date(2026, 11, 27))
    assert rates["EUR"][:2] == (1.17, date(2026, 11, 27)) and "JPY" not in rates
