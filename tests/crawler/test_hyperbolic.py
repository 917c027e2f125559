"""Hyperbolic: the public on-demand rental options, on the real answer of 2026-08-29
(gpu-index's capture), a changed answer, and a real crawl and replay into storage."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.hyperbolic import HyperbolicSpider
from tests.clirun import gpuradar
from tests.helpers import FIXTURES, callback_spider, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://api.hyperbolic.ai/v2/alpha/on-demand/rental-options"
REAL = json.loads((FIXTURES / "hyperbolic" / "rental_options_real.json").read_text())
RECORDINGS = FIXTURES.parent.parent / "gpuradar" / "recordings"


def parse(doc: Any) -> dict[tuple[str, str], PriceItem]:
    items = callback_spider(HyperbolicSpider).parse(response(doc, URL))
    return {(i.region, i.instance_type): i for i in items}


def test_each_option_is_one_offer_priced_per_option_hour():
    items = parse(REAL)
    assert len(items) == 13
    vm = items[("us-east-1", "1x h100 sxm5 virtual machine ethernet normal")]
    assert (vm.price, vm.gpu, vm.gpu_count, vm.vcpus, vm.memory_gb) == (
        3.19, "h100 sxm5", 1, 20, 240)
    # 2552 cents for the whole 8-GPU machine: $25.52/h, $3.19 per GPU
    metal = items[("uk-southeast-3", "8x h100 sxm5 bare metal infiniband")]
    assert (metal.price, metal.gpu_count, metal.vcpus) == (25.52, 8, 96)
    assert {i.pricing for i in items.values()} == {"on_demand"}
    assert {i.currency for i in items.values()} == {"USD"}


def test_availability_only_where_the_option_states_it():
    items = parse(REAL)
    pcie = items[("ca-east-1", "1x h100 pcie virtual machine ethernet normal")]
    assert (pcie.available, pcie.available_count) == (True, 2)
    others = [i for k, i in items.items() if k[0] != "ca-east-1"]
    assert len(others) == 12 and {(i.available, i.available_count) for i in others} == {
        (None, None)}
    doc = copy.deepcopy(REAL)
    doc[6]["totalAvailable"] = 0
    pcie = parse(doc)[("ca-east-1", "1x h100 pcie virtual machine ethernet normal")]
    assert (pcie.available, pcie.price) == (False, 2.75)  # sold out, still priced


def test_the_suppliers_cost_is_never_kept():
    doc = copy.deepcopy(REAL)
    for option in doc:
        option["providerCostPerHourCents"] = 123456
    items = parse(doc)
    assert "123456" not in repr(items) and "1234.56" not in repr(items)


def test_the_network_an_option_names_is_its_interconnect():
    proc = gpuradar("parse", "hyperbolic", str(FIXTURES / "hyperbolic" /
                                               "rental_options_real.json"))
    assert proc.returncode == 0, proc.stderr
    items = [json.loads(line) for line in proc.stdout.splitlines()]
    by_key = {(o["region"], o["instance_type"]): o["attributes"].get("interconnect")
              for o in items}
    assert by_key[("eu-west-3", "8x h100 sxm5 bare metal infiniband")]["inter_node"] == (
        "infiniband")
    assert by_key[("eu-north-4", "8x h100 sxm5 virtual machine ethernet rocev2")][
        "inter_node"] == "rdma"
    assert by_key[("jp-east-1", "8x h100 sxm5 virtual machine ethernet normal")][
        "inter_node"] is None


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.clear() or d.append({"options": []}), "costPerHourCents"),
    (lambda d: d[0].pop("costPerHourCents"), "costPerHourCents"),
    (lambda d: d[0].update(costPerHourCents="319"), "costPerHourCents"),
    (lambda d: d[0].update(costPerHourCents=0), "costPerHourCents"),
    (lambda d: d[0].pop("gpuCount"), "gpuCount"),
    (lambda d: d[0].update(gpuCount=True), "gpuCount"),
    (lambda d: d[0].pop("region"), "region"),
    (lambda d: d.clear(), "<list of options>"),
])
def test_a_changed_answer_is_an_error_naming_the_field(change, field):
    doc = copy.deepcopy(REAL)
    change(doc)
    with pytest.raises(ParseError) as err:
        parse(doc)
    assert err.value.field == field


def test_a_changed_answer_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                             sqlite_url):
    """The list becomes an envelope: nothing is read, nothing closed."""
    changed_answer_fails("hyperbolic", provider_server, tmp_path, sqlite_url,
                         "/v2/alpha/on-demand/rental-options",
                         json.dumps({"options": REAL}).encode(), "is dict, expected a list")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("hyperbolic", f"sqlite:///{tmp_path}/r.db")
    h100 = [o for o in offers if o["gpu"].startswith("H100")]
    assert len(h100) == 10 and len(offers) == 13
    assert {o["observed_at"] for o in offers} == {"2026-08-29T00:00:00Z"}
    assert min(o["price_per_gpu_usd"] for o in h100) == 2.75  # the PCIe option
