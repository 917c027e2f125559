"""Hot Aisle: the plan cards of the public pricing page, on the real page of 2026-08-22
(gpu-index's capture), a changed page, and a real crawl and replay into storage."""

from __future__ import annotations

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.hotaisle import HotaisleSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://hotaisle.xyz/pricing"
REAL = (FIXTURES / "hotaisle" / "pricing_cards_real.html").read_text()
RECORDINGS = FIXTURES.parent.parent / "gpuradar" / "recordings"


def parse(page: str) -> tuple[dict[str, PriceItem], HotaisleSpider]:
    spider = get_crawler(HotaisleSpider)._create_spider()
    items = spider.parse(response(page, URL, kind="html"))
    return {i.instance_type: i for i in items}, spider


def test_each_vm_size_is_one_on_demand_offer_priced_per_gpu_hour():
    items, _ = parse(REAL)
    assert {k: (i.gpu_count, i.price) for k, i in items.items()} == {
        "1x MI300x VM": (1, 2.99), "2x MI300x VM": (2, 5.98), "4x MI300x VM": (4, 11.96)}
    assert {(i.pricing, i.region, i.available, i.gpu) for i in items.values()} == {
        ("on_demand", "global", None, "MI300x")}


def test_bare_metal_by_the_month_is_counted_never_stored_as_on_demand():
    items, spider = parse(REAL)
    assert not any(i.gpu_count == 8 for i in items.values())
    assert "3.39" not in repr(items)
    assert spider.crawler.stats.get_value(
        "gpuradar/skipped/hotaisle_monthly_commitment") == 1


def test_prices_outside_the_plan_cards_are_never_read():
    """The hero cards and the grandfathered prose repeat prices: changing them changes
    nothing."""
    page = REAL.replace('md:text-4xl">$2.99/GPU/hr', 'md:text-4xl">$0.01/GPU/hr').replace(
        "$1.99/GPU/hr</strong>", "$0.02/GPU/hr</strong>")
    assert {i.price for i in parse(page)[0].values()} == {2.99, 5.98, 11.96}


@pytest.mark.parametrize(("change", "field"), [
    (lambda p: p.replace(">VM</p>", ">Virtual machine</p>"), "plan cards"),
    (lambda p: p.replace("<h2 ", "<h3 ").replace("</h2>", "</h3>"), "plan cards"),
    (lambda p: p.replace("mb-3 font-bold text-foreground\">$2.99/GPU/hr",
                         "mb-3 font-bold text-foreground\">€2.99/GPU/hr"), "price"),
    (lambda p: p.replace("<span>2x &amp; 4x</span>", "<span>2 or 4</span>"), "plan card"),
])
def test_a_changed_page_is_an_error_naming_what_changed(change, field):
    with pytest.raises(ParseError) as err:
        parse(change(REAL))
    assert err.value.field == field


def test_a_changed_page_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                           sqlite_url):
    changed_answer_fails("hotaisle", provider_server, tmp_path, sqlite_url, "/pricing",
                         REAL.replace(">VM</p>", ">Cloud</p>").encode(),
                         "field 'plan cards' has 1 GPU rows, expected at least 3")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("hotaisle", f"sqlite:///{tmp_path}/r.db")
    assert {(o["gpu"], o["price_per_gpu_usd"]) for o in offers} == {("MI300X", 2.99)}
    assert {o["observed_at"] for o in offers} == {"2026-08-22T00:00:00Z"}
    assert {o["attributes"]["price_source"] for o in offers} == {"list_page"}
