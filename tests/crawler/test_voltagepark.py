"""Voltage Park: the dashboard's public bare-metal locations, on the real answer of
2026-08-22 (gpu-index's capture), a changed answer, and a real crawl and replay."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.voltagepark import VoltageparkSpider
from tests.helpers import FIXTURES, callback_spider, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://cloud-api.voltagepark.com/api/v1/bare-metal/locations"
REAL = json.loads((FIXTURES / "voltagepark" / "locations_real.json").read_text())
RECORDINGS = FIXTURES.parent.parent / "gpuradar" / "recordings"
LOCATION = "a3111bd4-550a-47d0-838a-0a52bff2ae3f"


def parse(doc: Any) -> dict[str, PriceItem]:
    items = callback_spider(VoltageparkSpider).parse(response(doc, URL))
    return {i.instance_type: i for i in items}


def test_one_node_offer_per_location_and_network_priced_per_gpu_hour():
    items = parse(REAL)
    assert set(items) == {"8x h100-sxm5-80gb ethernet", "8x h100-sxm5-80gb infiniband"}
    eth, ib = items["8x h100-sxm5-80gb ethernet"], items["8x h100-sxm5-80gb infiniband"]
    assert (eth.price, eth.attributes["price_per_gpu"]) == (15.92, 1.99)
    assert (ib.price, ib.attributes["price_per_gpu"]) == (19.92, 2.49)
    assert {(i.region, i.gpu_count, i.vcpus, i.memory_gb, i.pricing, i.currency)
            for i in items.values()} == {(LOCATION, 8, 104, 1024, "on_demand", "USD")}


def test_no_free_gpus_is_unavailable_and_still_priced():
    items = parse(REAL)  # both counts were 0 at capture
    assert {(i.available, i.available_count) for i in items.values()} == {(False, 0)}
    doc = copy.deepcopy(REAL)
    doc["results"][0]["gpu_count_ethernet"] = 16
    assert parse(doc)["8x h100-sxm5-80gb ethernet"].available is True


def test_a_price_sent_as_a_number_reads_the_same():
    doc = copy.deepcopy(REAL)
    doc["results"][0]["gpu_price_ethernet"] = 1.99
    assert parse(doc)["8x h100-sxm5-80gb ethernet"].price == 15.92


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.pop("results"), "results"),
    (lambda d: d.update(results=[], total_result_count=0), "results"),
    (lambda d: d.update(has_next=True), "results"),
    (lambda d: d.update(total_result_count=2), "results"),
    (lambda d: d["results"][0].pop("gpu_price_infiniband"), "gpu_price_infiniband"),
    (lambda d: d["results"][0].update(gpu_price_ethernet="contact us"), "gpu_price_ethernet"),
    (lambda d: d["results"][0].update(gpu_price_ethernet="0.00"), "gpu_price_ethernet"),
    (lambda d: d["results"][0]["specs_per_node"].pop("gpu_model"), "gpu_model"),
])
def test_a_changed_answer_is_an_error_naming_the_field(change, field):
    doc = copy.deepcopy(REAL)
    change(doc)
    with pytest.raises(ParseError) as err:
        parse(doc)
    assert err.value.field == field


def test_a_changed_answer_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                             sqlite_url):
    """A second page appears: reading the first alone would close what is on the second."""
    paged = {**REAL, "has_next": True, "total_result_count": 2}
    changed_answer_fails("voltagepark", provider_server, tmp_path, sqlite_url,
                         "/api/v1/bare-metal/locations", json.dumps(paged).encode(),
                         "holds 1 of 2 locations")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("voltagepark", f"sqlite:///{tmp_path}/r.db")
    assert sorted(o["price_per_gpu_usd"] for o in offers) == [1.99, 2.49]
    assert {o["observed_at"] for o in offers} == {"2026-08-22T00:00:00Z"}
    assert {o["gpu"] for o in offers} == {"H100-SXM-80GB"}
