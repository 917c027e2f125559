"""Lium: the public node feed, on its real recorded answer (gpuhunt's recording of
2026-09-10), a changed answer, and a real crawl and replay into storage."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.lium import LiumSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://lium.io/api/public/v1/nodes"
REAL = json.loads((FIXTURES / "lium" / "nodes_real.json").read_text())
RECORDINGS = FIXTURES.parent.parent / "gpuradar" / "recordings"


def parse(doc: Any) -> tuple[dict[str, PriceItem], LiumSpider]:
    spider = get_crawler(LiumSpider)._create_spider()
    items = {i.attributes["node"]: i for i in spider.parse(response(doc, URL))}
    return items, spider


def test_each_node_is_one_offer_at_its_smallest_rentable_size():
    items, _ = parse(REAL)
    assert len(items) == 4
    h200 = items["f092246d-5704-4c9e-b57f-7c0710a06deb"]  # 8 GPUs, rents from 1, 5 free
    assert (h200.instance_type, h200.gpu_count, h200.price, h200.gpu) == (
        "f092246d 1x", 1, 3.99, "H200")
    assert (h200.available, h200.available_count) == (True, 5)
    assert (h200.region, h200.zone) == ("US-MS", "Jackson")
    # a part of a node: the feed does not say how its CPUs and RAM are shared out
    assert h200.vcpus is None and h200.memory_gb is None
    rtx = items["ebdfdbe2-875a-4caa-8eea-1ab5c2a763e1"]  # rented whole: 8 x $0.50
    assert (rtx.gpu_count, rtx.price, rtx.vcpus, rtx.memory_gb) == (8, 4.0, 384, 251)
    assert rtx.url == "https://lium.io/browse-pods/ebdfdbe2-875a-4caa-8eea-1ab5c2a763e1"
    assert {i.currency for i in items.values()} == {"USD"}


def test_secure_nodes_are_on_demand_and_spot_nodes_spot():
    items, _ = parse(REAL)
    assert items["45af0308-a13c-497f-93ea-ab06144eee29"].pricing == "spot"
    assert {i.pricing for k, i in items.items()
            if k != "45af0308-a13c-497f-93ea-ab06144eee29"} == {"on_demand"}


def test_fewer_free_gpus_than_the_smallest_rental_is_unavailable():
    doc = copy.deepcopy(REAL)
    doc["nodes"][3]["available_gpu_count"] = 4  # an 8x A100 node that rents only whole
    items, _ = parse(doc)
    a100 = items["6780e503-6861-4dca-bdec-ca9dcf37e8d0"]
    assert (a100.available, a100.available_count, a100.price) == (False, 4, 9.84)


def test_an_unknown_tier_is_counted_never_guessed():
    doc = copy.deepcopy(REAL)
    doc["nodes"][0]["tier"] = "reserved"
    items, spider = parse(doc)
    assert "ebdfdbe2-875a-4caa-8eea-1ab5c2a763e1" not in items and len(items) == 3
    assert spider.crawler.stats.get_value("gpuradar/skipped/lium_unknown_tier") == 1


def test_nodes_sharing_the_short_id_are_named_by_their_whole_id():
    doc = copy.deepcopy(REAL)
    doc["nodes"][2]["id"] = "ebdfdbe2-0000-4caa-8eea-000000000000"
    items, _ = parse(doc)
    assert items["ebdfdbe2-0000-4caa-8eea-000000000000"].instance_type == (
        "ebdfdbe2-0000-4caa-8eea-000000000000 1x")
    assert items["f092246d-5704-4c9e-b57f-7c0710a06deb"].instance_type == "f092246d 1x"


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.update(nodes={}), "nodes"),
    (lambda d: d.update(nodes=[]), "nodes"),
    (lambda d: d.pop("nodes"), "nodes"),
    (lambda d: d["nodes"][1].pop("price_per_gpu_hour"), "price_per_gpu_hour"),
    (lambda d: d["nodes"][1].update(price_per_gpu_hour="3.99"), "price_per_gpu_hour"),
    (lambda d: d["nodes"][1].update(min_rentable_gpu_count=9), "min_rentable_gpu_count"),
])
def test_a_changed_answer_is_an_error_naming_the_field(change, field):
    doc = copy.deepcopy(REAL)
    change(doc)
    with pytest.raises(ParseError) as err:
        parse(doc)
    assert err.value.field == field


def test_a_changed_answer_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                             sqlite_url):
    """Lium renames its list: the crawl fails in one line and every offer stays listed."""
    renamed = {"generated_at": REAL["generated_at"], "machines": REAL["nodes"][:1]}
    changed_answer_fails("lium", provider_server, tmp_path, sqlite_url, "/api/public/v1/nodes",
                         json.dumps(renamed).encode(), "field 'nodes' is missing")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("lium", f"sqlite:///{tmp_path}/r.db")
    [h200] = [o for o in offers if o["gpu"] == "H200-SXM-141GB"]
    assert h200["observed_at"] == "2026-09-10T00:00:00Z"
    assert h200["price_per_gpu_usd"] == 3.99 and h200["attributes"]["price_source"] == "api"
