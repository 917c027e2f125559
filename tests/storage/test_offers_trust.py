"""Offers you can trust (issue #15): uncatalogued products are reported, unreadable and
implausible prices never close or replace an offer, one price per offer per crawl, and a
crawl that suddenly lists far fewer offers closes nothing until confirmed."""

from __future__ import annotations

import json
import math

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES
from tests.provider_server import Reply, serve_standard
from tests.routes.core import azure_retail_prices


def metric(registry, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def test_an_unrecognised_shape_is_reported_in_summary_sources_and_metrics(
        tmp_path, provider_server, db_url, engine):
    from gpuradar.scheduler.metrics import Metrics

    shapes = json.loads((FIXTURES / "oci" / "shapes.json").read_text())
    unknown = json.loads(json.dumps(next(s for s in shapes["items"]
                                         if s["name"] == "BM.GPU.H100.8")))
    unknown["name"] = "BM.GPU5.8"  # a shape family this spider cannot read a GPU from
    shapes["items"].append(unknown)
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    provider_server.route("GET", "/a/ocom/docs/cloudestimator2/data/shapes.json",
                          lambda req: Reply(body=json.dumps(shapes).encode()))
    proc = gpuradar("crawl", "oci", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 27
    assert result["uncatalogued"] == {"BM.GPU5.8": 1}
    assert "BM.GPU5.8 is not in gpuradar's catalog" in proc.stderr
    table = gpuradar("crawl", "oci", config=cfg, db_url=db_url, env={"COLUMNS": "250"})
    assert "BM.GPU5.8 (1)" in table.stdout
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=db_url)}
    assert rows["oci"]["uncatalogued"] == {"BM.GPU5.8": 1}
    assert rows["azure"]["uncatalogued"] == {}
    sources_table = gpuradar("sources", config=cfg, db_url=db_url, env={"COLUMNS": "250"})
    assert "BM.GPU5.8 (1)" in sources_table.stdout
    metrics = Metrics(lambda: engine)
    assert metric(metrics.registry, "gpuradar_uncatalogued_offers", source="oci") == 1


# -- storage semantics (both databases) --------------------------------------------------
def _item(instance: str, price, at, **kw):
    from gpuradar.core.items import PriceItem

    fields = {"source": "azure", "region": "eastus", "instance_type": instance,
              "pricing": "on_demand", "gpu": "H100-SXM-80GB", "gpu_count": 8, "price": price,
              "currency": "USD", "observed_at": at, "price_usd": price,
              "price_per_gpu_usd": price / 8 if isinstance(price, float | int) else None}
    fields.update(kw)
    return PriceItem(**fields)


def _crawl(engine, items, at, *, unreadable=(), status="ok", guard=0.5, source="azure"):
    from gpuradar.storage.ingest import CrawlWriter

    writer = CrawlWriter(engine, source, started_at=at, shrink_guard=guard)
    writer.add(items)
    return writer.finish(status, unreadable=unreadable)


def _listing(engine, source: str, names: list[str], at):
    """A successful crawl of `source` listing `names`, each at 10 USD/h."""
    return _crawl(engine, [_item(n, 10.0, at, source=source) for n in names], at, source=source)


T0 = __import__("datetime").datetime(2026, 11, 1, 12, tzinfo=__import__("datetime").UTC)
HOUR = __import__("datetime").timedelta(hours=1)


def test_a_price_round_trips_exactly(engine):
    from gpuradar.storage import queries

    _crawl(engine, [_item("A", 2.01, T0), _item("B", 0.29, T0), _item("C", 1.005, T0)], T0)
    for name, price in (("A", 2.01), ("B", 0.29), ("C", 1.005)):
        offer = queries.find_offer(engine, "azure", name)[0]
        assert offer["price"] == price
        [span] = queries.spans(engine, offer["id"])
        assert span["price"] == price  # from integer micro-units, rounded not truncated


def test_an_unreadable_price_keeps_the_offer_open_with_its_last_good_price(engine):
    from gpuradar.storage import queries

    _crawl(engine, [_item("A", 80.0, T0), _item("B", 40.0, T0)], T0)
    t1, t2 = T0 + HOUR, T0 + 2 * HOUR
    summary = _crawl(engine, [_item("A", 72.0, t1)], t1,
                     unreadable=[("eastus", "", "B", "on_demand")])
    assert (summary.status, summary.closed, summary.changed, summary.unreadable) == (
        "ok", 0, 1, 1)
    b = queries.find_offer(engine, "azure", "B")[0]
    assert b["active"] is True and b["price"] == 40.0
    assert b["unreadable_since"].replace(tzinfo=__import__("datetime").UTC) == t1
    assert [s["price"] for s in queries.spans(engine, b["id"])] == [40.0]
    # Readable again at the same price: the flag goes, no new span.
    _crawl(engine, [_item("A", 72.0, t2), _item("B", 40.0, t2)], t2)
    b = queries.find_offer(engine, "azure", "B")[0]
    assert b["unreadable_since"] is None and len(queries.spans(engine, b["id"])) == 1
    # Unreadable for an offer never stored: nothing to keep, nothing invented.
    _crawl(engine, [_item("A", 72.0, t2 + HOUR), _item("B", 40.0, t2 + HOUR)], t2 + HOUR,
           unreadable=[("eastus", "", "Z", "on_demand")])
    assert queries.find_offer(engine, "azure", "Z") == []


def test_a_value_too_large_for_storage_fails_nothing(engine):
    from gpuradar.storage import queries

    summary = _crawl(engine, [_item("A", 1e13, T0), _item("B", 40.0, T0)], T0)
    assert summary.status == "ok" and summary.items == 1
    assert summary.dropped == {"unstorable_price": 1}
    assert [o["instance_type"] for o in queries.current_offers(engine)] == ["B"]


def test_shrink_guard_closes_nothing_until_the_next_crawl_confirms(engine):
    from gpuradar.storage import queries

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0 + i, T0) for i, n in enumerate(names)], T0)
    t1, t2, t3 = T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR
    held = _crawl(engine, [_item("I0", 10.0, t1), _item("I1", 11.0, t1)], t1)
    assert (held.status, held.closed, held.held) == ("partial", 0, 8)
    assert held.error == ("shrink guard: listed 2 offers, the last successful crawl listed 10 "
                          "(fewer than 5); 8 missing offer(s) not closed unless the next crawl "
                          "confirms the drop")
    assert len(queries.current_offers(engine)) == 10
    # The next crawl sees the same drop: confirmed, the missing offers close.
    confirmed = _crawl(engine, [_item("I0", 10.0, t2), _item("I1", 11.0, t2)], t2)
    assert (confirmed.status, confirmed.closed, confirmed.held) == ("ok", 8, 0)
    assert len(queries.current_offers(engine)) == 2
    # A drop that the next crawl does not confirm (the offers came back) closes nothing.
    _crawl(engine, [_item(n, 10.0 + i, t3) for i, n in enumerate(names)], t3)
    t4, t5 = t3 + HOUR, t3 + 2 * HOUR
    assert _crawl(engine, [_item("I0", 10.0, t4)], t4).status == "partial"
    back = _crawl(engine, [_item(n, 10.0 + i, t5) for i, n in enumerate(names)], t5)
    assert (back.status, back.closed) == ("ok", 0)
    assert len(queries.current_offers(engine)) == 10


def test_only_the_offer_with_an_unreadable_price_is_flagged(engine):
    from gpuradar.storage import queries

    names = [f"I{n}" for n in range(4)]
    _crawl(engine, [_item(n, 10.0 + i, T0) for i, n in enumerate(names)], T0)
    key = ("eastus", "", "I1", "on_demand")  # (region, zone, instance type, pricing)
    summary = _crawl(engine, [_item(n, 10.0 + i, T0 + HOUR) for i, n in enumerate(names)
                              if n != "I1"], T0 + HOUR, unreadable=[key])
    assert (summary.status, summary.closed, summary.unreadable) == ("ok", 0, 1)
    flagged = {o["instance_type"]: o["unreadable_since"] is not None
               for o in queries.current_offers(engine)}
    assert flagged == {"I0": False, "I1": True, "I2": False, "I3": False}


def test_shrink_guard_is_configurable_and_a_small_drop_closes_at_once(engine):
    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    six = _crawl(engine, [_item(n, 10.0, T0 + HOUR) for n in names[:6]], T0 + HOUR)
    assert (six.status, six.closed) == ("ok", 4)  # 6 of 10 is not below half
    one = _crawl(engine, [_item("I0", 10.0, T0 + 2 * HOUR)], T0 + 2 * HOUR, guard=0)
    assert (one.status, one.closed) == ("ok", 5)  # guard off


def test_the_shrink_guard_compares_a_source_only_with_its_own_crawls(engine):
    """Another source's larger crawl is no baseline for this one, and another source's held
    drop confirms nothing here."""
    names = [f"I{n}" for n in range(10)]
    _listing(engine, "azure", names, T0)
    _listing(engine, "vastai", [f"V{n}" for n in range(100)], T0)
    six = _listing(engine, "azure", names[:6], T0 + HOUR)  # 6 of azure's 10: believed, 4 closed
    assert (six.status, six.closed, six.held) == ("ok", 4, 0)
    assert _listing(engine, "vastai", ["V0"], T0 + HOUR).held == 99  # vastai's own drop: held
    two = _listing(engine, "azure", names[:2], T0 + 2 * HOUR)  # azure's first sight of it: held
    assert (two.status, two.closed, two.held) == ("partial", 0, 4)

    # A source named before this one holds a drop too: it confirms nothing here either.
    assert _listing(engine, "azure", names, T0 + 3 * HOUR).status == "ok"
    names_aws = [f"A{n}" for n in range(10)]
    _listing(engine, "aws", names_aws, T0 + 3 * HOUR)
    assert _listing(engine, "aws", names_aws[:1], T0 + 4 * HOUR).held == 9
    three = _listing(engine, "azure", names[:3], T0 + 4 * HOUR)  # azure's first sight of a new drop
    assert (three.status, three.closed, three.held) == ("partial", 0, 7)

def test_a_crawl_left_running_neither_confirms_nor_resets_a_held_drop(engine):
    """A crawl of the source that never finished (its process was killed) says nothing about
    the drop: the crawl after it confirms the drop the last finished crawl held."""
    from gpuradar.storage.ingest import CrawlWriter

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    held = _crawl(engine, [_item("I0", 10.0, T0 + HOUR)], T0 + HOUR)
    assert (held.status, held.held) == ("partial", 9)
    CrawlWriter(engine, "azure", started_at=T0 + 2 * HOUR)  # never finished
    confirmed = _crawl(engine, [_item("I0", 10.0, T0 + 3 * HOUR)], T0 + 3 * HOUR)
    assert (confirmed.status, confirmed.closed, confirmed.held) == ("ok", 9, 0)



def test_an_interrupted_crawl_confirms_no_drop(engine):
    """A crawl its process never finished (failed as interrupted at the next start) held
    nothing: the first crawl after it that sees a drop holds it."""
    from gpuradar.storage import queries
    from gpuradar.storage.ingest import CrawlWriter

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    CrawlWriter(engine, "azure", started_at=T0 + HOUR)  # never finished
    assert queries.mark_interrupted_crawls(engine) == 1
    assert queries.last_crawls(engine)["azure"]["held"] == 0
    drop = _crawl(engine, [_item("I0", 10.0, T0 + 2 * HOUR)], T0 + 2 * HOUR)
    assert (drop.status, drop.closed, drop.held) == ("partial", 0, 9)

def test_the_shrink_guard_counts_offers_listed_with_an_unreadable_price(engine):
    """An offer listed with a price gpuradar cannot read was listed all the same: the guard's
    message counts it, and it is neither closed nor held."""
    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    held = _crawl(engine, [_item("I0", 10.0, T0 + HOUR), _item("I1", 10.0, T0 + HOUR)],
                  T0 + HOUR, unreadable=[("eastus", "", "I2", "on_demand")])
    assert (held.status, held.closed, held.held, held.unreadable) == ("partial", 0, 7, 1)
    assert held.error == ("shrink guard: listed 3 offers, the last successful crawl listed 10 "
                          "(fewer than 5); 7 missing offer(s) not closed unless the next crawl "
                          "confirms the drop")


def test_the_shrink_guard_measures_a_drop_against_the_last_successful_crawl_only(engine):
    """A failed or partial crawl (cut short: it lists what it got) is no baseline: a crawl
    listing 4 of the 10 offers of the last successful one is held, however few the crawls in
    between listed."""
    from gpuradar.storage import queries

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    assert _crawl(engine, [_item("I0", 10.0, T0 + HOUR)], T0 + HOUR,
                  status="failed").status == "failed"
    assert _crawl(engine, [_item("I0", 10.0, T0 + 2 * HOUR)], T0 + 2 * HOUR,
                  status="partial").held == 0
    four = _crawl(engine, [_item(n, 10.0, T0 + 3 * HOUR) for n in names[:4]], T0 + 3 * HOUR)
    assert (four.status, four.closed, four.held) == ("partial", 0, 6)
    assert "the last successful crawl listed 10 (fewer than 5)" in four.error
    assert len(queries.current_offers(engine)) == 10


def test_an_offer_unreadable_again_after_a_readable_crawl_is_flagged_again(engine):
    """Unreadable, readable, then unreadable again in one process (its memory of the offers
    kept between crawls): the offer is flagged since the latest crawl that could not read
    it."""
    from gpuradar.storage import queries

    key = ("eastus", "", "B", "on_demand")
    _crawl(engine, [_item("A", 80.0, T0), _item("B", 40.0, T0)], T0)
    _crawl(engine, [_item("A", 80.0, T0 + HOUR)], T0 + HOUR, unreadable=[key])
    _crawl(engine, [_item("A", 80.0, T0 + 2 * HOUR), _item("B", 40.0, T0 + 2 * HOUR)],
           T0 + 2 * HOUR)
    assert queries.find_offer(engine, "azure", "B")[0]["unreadable_since"] is None
    again = _crawl(engine, [_item("A", 80.0, T0 + 3 * HOUR)], T0 + 3 * HOUR, unreadable=[key])
    assert (again.status, again.unreadable, again.closed) == ("ok", 1, 0)
    b = queries.find_offer(engine, "azure", "B")[0]
    assert (b["active"], b["price"], b["unreadable_since"]) == (True, 40.0, T0 + 3 * HOUR)


def test_the_largest_price_a_change_point_holds_is_stored_and_the_next_is_not(engine):
    """Storage's last guard: a price just under 2**63 micro-units is stored as it is, the
    float one step up (2**63 once in micro-units) is dropped as unstorable, and neither fails
    the crawl."""
    from gpuradar.storage import queries

    largest, limit = 9_223_372_036_854.773, 9_223_372_036_854.775
    summary = _crawl(engine, [_item("A", largest, T0), _item("B", limit, T0)], T0)
    assert (summary.status, summary.items, summary.dropped) == (
        "ok", 1, {"unstorable_price": 1})
    assert [(o["instance_type"], o["price"]) for o in queries.current_offers(engine)] == [
        ("A", largest)]



@pytest.mark.parametrize("price", [math.nan, math.inf, -math.inf, 0, -2.0, True, 10**400])
def test_a_price_no_change_point_can_hold_is_dropped_and_fails_nothing(engine, price):
    """Not a finite positive number within 64-bit micro-units (an integer too large for a
    float among them): dropped as unstorable, the crawl's other offers stored."""
    from gpuradar.storage import queries

    bad = _item("A", 80.0, T0)
    bad.price = price
    summary = _crawl(engine, [bad, _item("B", 40.0, T0)], T0)
    assert (summary.status, summary.items, summary.dropped) == (
        "ok", 1, {"unstorable_price": 1})
    assert [o["instance_type"] for o in queries.current_offers(engine)] == ["B"]


def test_a_crawl_listing_exactly_the_guards_share_closes_the_missing_offers(engine):
    """The guard holds a crawl listing fewer than half the last successful crawl's offers:
    exactly half is believed, and the other half closes at once."""
    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    half = _crawl(engine, [_item(n, 10.0, T0 + HOUR) for n in names[:5]], T0 + HOUR)
    assert (half.status, half.closed, half.held) == ("ok", 5, 0)


def test_offers_listed_with_an_unreadable_price_count_towards_the_guards_share(engine):
    """4 offers read and 1 listed with an unreadable price are 5 of the last crawl's 10: the
    drop is believed, the 5 not listed close and the unreadable one stays open."""
    from gpuradar.storage import queries

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    five = _crawl(engine, [_item(n, 10.0, T0 + HOUR) for n in names[:4]], T0 + HOUR,
                  unreadable=[("eastus", "", "I4", "on_demand")])
    assert (five.status, five.closed, five.held, five.unreadable) == ("ok", 5, 0, 1)
    assert sorted(o["instance_type"] for o in queries.current_offers(engine)) == names[:5]


def test_overlapping_crawls_of_a_source_are_each_judged_against_the_crawls_before_them(
        engine):
    """Two crawls of one source at once (`gpuradar crawl` beside the daemon): each read the
    offers as they stood when it started, so the shrink guard compares it with the last
    successful crawl before it, and only a crawl before it can confirm a drop."""
    from gpuradar.storage.ingest import CrawlWriter

    def writer(at):
        return CrawlWriter(engine, "azure", started_at=at, shrink_guard=0.5)

    names = [f"I{n}" for n in range(10)]
    _crawl(engine, [_item(n, 10.0, T0) for n in names], T0)
    first, second = writer(T0 + HOUR), writer(T0 + 2 * HOUR)
    second.add([_item(n, 10.0, T0 + 2 * HOUR) for n in names + [f"J{n}" for n in range(10)]])
    assert second.finish("ok").new_offers == 10
    first.add([_item(n, 10.0, T0 + HOUR) for n in names[:6]])
    six = first.finish("ok")   # 6 of the 10 before it, not of the 20 listed after it started
    assert (six.status, six.closed, six.held) == ("ok", 4, 0)

    _crawl(engine, [_item(n, 10.0, T0 + 3 * HOUR) for n in names], T0 + 3 * HOUR)
    first, second = writer(T0 + 4 * HOUR), writer(T0 + 5 * HOUR)
    second.add([_item(n, 10.0, T0 + 5 * HOUR) for n in names[:2]])
    assert second.finish("ok").held == 8
    first.add([_item(n, 10.0, T0 + 4 * HOUR) for n in names[:2]])
    held = first.finish("ok")  # the crawl after it saw the drop too: no confirmation
    assert (held.status, held.closed, held.held) == ("partial", 0, 8)


def test_a_negative_price_reaching_storage_is_not_stored(engine):
    """The pipeline drops a negative price first; storage, the last guard, refuses one too."""
    from gpuradar.storage import queries

    summary = _crawl(engine, [_item("A", -80.0, T0), _item("B", 40.0, T0)], T0)
    assert summary.status == "ok" and summary.items == 1
    assert summary.dropped == {"unstorable_price": 1}
    assert [o["instance_type"] for o in queries.current_offers(engine)] == ["B"]


def test_a_smaller_crawl_of_a_source_named_before_is_no_baseline(engine):
    """azure's drop to 4 of its 10 offers is held, though aws (named before azure) last
    listed only 4."""
    names = [f"I{n}" for n in range(10)]
    _listing(engine, "azure", names, T0)
    _listing(engine, "aws", names[:4], T0 + HOUR)
    four = _listing(engine, "azure", names[:4], T0 + 2 * HOUR)
    assert (four.status, four.closed, four.held) == ("partial", 0, 6)

# -- through `gpuradar crawl` over a local server standing in for the provider ------------
def _azure_server(provider_server, tmp_path, edit=None, second_page=True, **sections):
    """The Azure fixture pages' meters served per region as the API does, page 1's edited
    by `edit(items)` when given; page 2's left out unless `second_page`."""
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["azure"]),
                       scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 0}, **sections)
    first, second = (json.loads((FIXTURES / "azure" / name).read_text())["Items"]
                     for name in ("prices_page1.json", "prices_page2.json"))
    if edit is not None:
        edit(first)
    items = first + (second if second_page else [])
    provider_server.route("GET", "/api/retail/prices",
                          lambda req: azure_retail_prices(req, items))
    return cfg


def _meter(items, region, sku, spot=False):
    return next(i for i in items if i["armRegionName"] == region and i["armSkuName"] == sku
                and i["meterName"].endswith(" Spot") == spot
                and "Windows" not in i["productName"] and "Low Priority" not in i["meterName"]
                and i["type"] == "Consumption")


def test_one_bad_value_never_corrupts_or_loses_data(tmp_path, provider_server, db_url, engine):
    """One answer with an "N/A" price, a 1e13 and a 1e9 price beside valid changes."""
    cfg = _azure_server(provider_server, tmp_path)
    assert gpuradar("crawl", "azure", config=cfg, db_url=db_url).returncode == 0

    def bad_values(items):
        _meter(items, "eastus", "Standard_NC24ads_A100_v4")["retailPrice"] = "N/A"
        _meter(items, "eastus", "Standard_ND96isr_H100_v5")["retailPrice"] = 1e13
        _meter(items, "eastus", "Standard_ND96isr_H100_v5", spot=True)["retailPrice"] = 1e9
        _meter(items, "eastus", "Standard_NC40ads_H100_v5")["retailPrice"] = 6.5      # valid
        _meter(items, "southcentralus", "Standard_NC4as_T4_v3")["retailPrice"] = 0.55  # valid
        _meter(items, "westus3", "Standard_NV6ads_A10_v5")["retailPrice"] = 0.4       # valid

    cfg = _azure_server(provider_server, tmp_path, bad_values)
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["status"] in ("ok", "partial") and result["closed"] == 0
    assert result["changed"] == 3 and result["unreadable"] == 3
    assert result["dropped"] == {"bad_price": 1, "implausible_price": 2, "zero_price": 1}
    assert proc.stderr.count("outside the plausible 0.001-1000.0 USD per GPU-hour") == 2
    offers = {(o["region"], o["instance_type"], o["pricing"]): o
              for o in gpuradar_json("prices", "--source", "azure", config=cfg, db_url=db_url)}
    assert len(offers) == 13  # nothing closed
    assert offers[("eastus", "Standard_NC40ads_H100_v5", "on_demand")]["price"] == 6.5
    assert offers[("southcentralus", "Standard_NC4as_T4_v3", "on_demand")]["price"] == 0.55
    assert offers[("westus3", "Standard_NV6ads_A10_v5", "on_demand")]["price"] == 0.4
    na = offers[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
    assert na["price"] == 3.673 and na["unreadable_since"]  # open, last good price, flagged
    assert offers[("eastus", "Standard_ND96isr_H100_v5", "on_demand")]["price"] == 98.32
    assert offers[("eastus", "Standard_ND96isr_H100_v5", "spot")]["price"] == 39.328
    assert max(o["price"] for o in offers.values()) < 1000
    history = gpuradar_json("history", "azure", "Standard_ND96isr_H100_v5", "--region", "eastus",
                            "--pricing", "on_demand", config=cfg, db_url=db_url)
    assert max(s["price"] for s in history) < 1000
    # No rule can match a value that was never stored.
    [rule] = gpuradar_json("rules", "test", "H100 under $1000000000/h", config=cfg,
                           db_url=db_url)
    assert rule["best"] < 1000 / 8
    with engine.connect() as conn:
        from sqlalchemy import text

        assert conn.execute(text("SELECT max(price_micros) FROM price_change")).scalar() < 1e9


def test_bad_price_kinds_are_counted_apart():
    from gpuradar.crawler.pipelines import validate

    def reason(price, currency="USD"):
        return validate(_item("A", price, T0, currency=currency))

    assert [reason(p) for p in (None, "N/A", float("nan"), float("inf"), -1.0, 0, True)] == [
        "no_price", "bad_price", "bad_price", "bad_price", "negative_price", "zero_price",
        "bad_price"]
    item = _item("A", "2.01", T0, currency="usd")
    assert validate(item) is None and item.price == 2.01 and item.currency == "USD"


def test_lower_case_currency_is_stored_upper_case(tmp_path, provider_server, sqlite_url):
    def lower(items):
        for item in items:
            item["currencyCode"] = "usd"

    cfg = _azure_server(provider_server, tmp_path, lower)
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0
    offers = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert {o["currency"] for o in offers} == {"USD"}


def test_a_large_drop_closes_nothing_until_the_next_crawl_confirms_it(tmp_path, provider_server,
                                                                     db_url):
    cfg = _azure_server(provider_server, tmp_path)
    assert gpuradar("crawl", "azure", config=cfg, db_url=db_url).returncode == 0

    def one_meter(items):  # page 1 lists one meter; page 2 is not served
        keep = _meter(items, "eastus", "Standard_NC40ads_H100_v5")
        items[:] = [keep]

    cfg = _azure_server(provider_server, tmp_path, one_meter, second_page=False)
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url)
    [held] = json.loads(proc.stdout)
    assert (held["status"], held["items"], held["closed"], held["held"]) == ("partial", 1, 0, 12)
    assert "shrink guard: listed 1 offers, the last successful crawl listed 13" in held["error"]
    assert len(gpuradar_json("prices", "--source", "azure", config=cfg, db_url=db_url)) == 13
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=db_url)}
    assert rows["azure"]["last_status"] == "partial"
    assert "shrink guard" in rows["azure"]["last_error"]
    # The next crawl lists the same one offer: the drop is confirmed.
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url)
    [confirmed] = json.loads(proc.stdout)
    assert (confirmed["status"], confirmed["closed"]) == ("ok", 12)
    assert [o["instance_type"] for o in gpuradar_json("prices", "--source", "azure",
                                                      config=cfg, db_url=db_url)] == [
        "Standard_NC40ads_H100_v5"]


def test_shrink_guard_per_source_option(tmp_path, provider_server, sqlite_url):
    cfg = _azure_server(provider_server, tmp_path, sources={"azure": {"shrink_guard": 0}})
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0

    def one_meter(items):
        items[:] = [_meter(items, "eastus", "Standard_NC40ads_H100_v5")]

    cfg = _azure_server(provider_server, tmp_path, one_meter,
                        sources={"azure": {"shrink_guard": 0}})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["closed"]) == ("ok", 7)  # page 2's 5 offers remain


@pytest.mark.parametrize("batch", [1000, 1])
def test_duplicate_offer_is_counted_and_the_first_price_kept(tmp_path, provider_server,
                                                            sqlite_url, batch):
    """RunPod's answer (built from the real capture) listing one GPU type twice with another
    price: the second observation of each offer is refused, whatever its price. In batches
    of one offer, the first observation is already stored when the second arrives."""
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["runpod"]),
                       scrapy={"DOWNLOAD_DELAY": 0, "GPURADAR_BATCH_SIZE": batch})
    original = provider_server.routes[("POST", "/graphql")]

    def twice(req):
        data = json.loads(original(req).body)
        for alias, types in data["data"].items():
            if alias.startswith("datacenters_"):
                continue  # data centers, not GPU types
            h100 = next(t for t in types if t["id"] == "NVIDIA H100 80GB HBM3")
            types.append({**h100, "securePrice": 1.0, "communityPrice": 1.0})
        return Reply(body=json.dumps(data).encode())

    provider_server.route("POST", "/graphql", twice)
    proc = gpuradar("crawl", "runpod", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    # 8 counts x 2 clouds, the 1-GPU secure pod once more: it is one offer per data center
    # listing H100 (two)
    assert result["status"] == "ok" and result["dropped"] == {"duplicate_offer": 17}, result
    h100 = [o for o in gpuradar_json("prices", "--source", "runpod", "--gpu", "H100",
                                     config=cfg, db_url=sqlite_url)
            if o["attributes"]["cloud"] == "secure"]
    assert {o["price_per_gpu_usd"] for o in h100} == {3.29}
    # A refused duplicate is not an unreadable price: the offer is not flagged.
    assert result["unreadable"] == 0 and {o["unreadable_since"] for o in h100} == {None}


def test_plausible_range_is_configurable_per_source_and_globally():
    from scrapy.utils.test import get_crawler

    from gpuradar.core.currency import FxTable
    from gpuradar.crawler.pipelines import normalize, price_range

    crawler = get_crawler(settings_dict={
        "GPURADAR_SOURCES": {"azure": {"price_range": [0.01, 5]}},
        "GPURADAR_PRICE_RANGE": [0.002, 2000]})
    assert price_range(crawler, "azure") == (0.01, 5.0)
    assert price_range(crawler, "gcp") == (0.002, 2000.0)
    assert price_range(get_crawler(), "gcp") == (0.001, 1000.0)  # the documented default
    h100 = _item("A", 98.32, T0)  # 12.29 per GPU-hour
    assert normalize(h100, FxTable(), (0.01, 5.0)) == "implausible_price"
    assert normalize(_item("A", 98.32, T0), FxTable()) is None
    assert normalize(_item("A", 0.004, T0), FxTable()) == "implausible_price"  # $0.0005/GPU-h


def test_fx_crawl_reports_the_rates_it_stored(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["fx"]),
                       scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "fx", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    # 30 ECB rates against the euro become 30 USD rates: USD itself out, EUR in.
    assert (result["status"], result["items"]) == ("ok", 30)
    # USD per unit: 1.1562 USD and 8.1871 CNY to the euro on 2026-11-27 (the ECB file).
    from gpuradar.storage.db import get_engine
    from gpuradar.storage.queries import latest_fx

    rates = latest_fx(get_engine(sqlite_url))
    assert round(rates["CNY"][0], 6) == round(1.1562 / 8.1871, 6)
    assert rates["EUR"][0] == 1.1562


def test_an_exchange_rate_that_cannot_be_right_is_not_stored(tmp_path, provider_server,
                                                             sqlite_url):
    """A negative rate in the ECB file: that currency gets no rate, the others do."""
    from gpuradar.storage.db import get_engine
    from gpuradar.storage.queries import latest_fx
    from tests.provider_server import fixture

    endpoints = serve_standard(provider_server, ["fx"])
    body = fixture("fx/eurofxref-daily.xml").replace(b"rate='8.1871'", b"rate='-8.1871'")
    (method, path) = next(k for k in provider_server.routes if "eurofxref" in k[1])
    provider_server.route(method, path, lambda req: Reply(body=body, content_type="text/xml"))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0})
    gpuradar("crawl", "fx", "--json", config=cfg, db_url=sqlite_url)
    rates = latest_fx(get_engine(sqlite_url))
    assert "CNY" not in rates and "EUR" in rates


def test_unknown_gpu_and_uncatalogued_names_are_warned_once_per_process(caplog):
    """A daemon crawls all day with one crawl service (its CrawlMemory): the second crawl
    says nothing new."""
    import logging

    from scrapy.utils.test import get_crawler

    from gpuradar.crawler.pipelines import NormalizePipeline
    from gpuradar.crawler.spiders.oci import OciSpider
    from gpuradar.storage.ingest import CrawlMemory

    memory = CrawlMemory()
    with caplog.at_level(logging.WARNING):
        for _crawl_number in range(2):
            crawler = get_crawler(OciSpider, {"GPURADAR_CRAWL_MEMORY": memory})
            pipeline = NormalizePipeline(crawler)
            pipeline.process_item(_item("A", 98.32, T0, gpu="Quantum QPU 9000", source="vastai"))
            assert crawler.stats.get_value("gpuradar/unknown_gpu_names") == ["Quantum QPU 9000"]
            spider = crawler._create_spider()
            spider.uncatalogued("BM.GPU9.8", "GPU model not recognised from the shape name")
            assert crawler.stats.get_value("gpuradar/uncatalogued") == 1
    assert caplog.text.count("'Quantum QPU 9000' matches nothing in the catalog") == 1
    assert caplog.text.count("BM.GPU9.8 is not in gpuradar's catalog") == 1


def test_a_request_answered_404_without_retry_makes_the_crawl_partial(tmp_path, provider_server,
                                                                    sqlite_url):
    """Scrapy ignores a 404 (no retry, no errback): the crawl still missed part of the
    source, so it is partial and closes nothing."""
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["runpod"]),
                       scrapy={"DOWNLOAD_DELAY": 0})
    assert gpuradar("crawl", "runpod", config=cfg, db_url=sqlite_url).returncode == 0
    before = gpuradar_json("prices", "--source", "runpod", "--gpu", "H100", config=cfg,
                           db_url=sqlite_url)
    original = provider_server.routes[("POST", "/graphql")]

    def count_8_gone(req):
        if "gpuCount: 8" in req.json()["query"]:
            return Reply(404, b'{"errors": [{"message": "not found"}]}')
        return original(req)

    provider_server.route("POST", "/graphql", count_8_gone)
    proc = gpuradar("crawl", "runpod", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["closed"]) == ("partial", 0)
    assert "HTTP 404" in result["error"]
    after = gpuradar_json("prices", "--source", "runpod", "--gpu", "H100", config=cfg,
                          db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]
    assert any(o["instance_type"].startswith("8x") for o in after)


def test_an_unstorable_value_keeps_a_known_offer_open(engine):
    from gpuradar.storage import queries

    _crawl(engine, [_item("A", 80.0, T0), _item("B", 40.0, T0)], T0)
    summary = _crawl(engine, [_item("A", 1e13, T0 + HOUR), _item("B", 41.0, T0 + HOUR)],
                     T0 + HOUR)
    assert (summary.status, summary.closed, summary.changed, summary.unreadable) == (
        "ok", 0, 1, 1)
    a = queries.find_offer(engine, "azure", "A")[0]
    assert a["active"] is True and a["price"] == 80.0 and a["unreadable_since"] is not None


def test_a_zero_price_reaching_storage_is_not_stored(engine):
    """The pipeline drops a zero price first; storage, the last guard, refuses one too."""
    from gpuradar.storage import queries

    summary = _crawl(engine, [_item("A", 0.0, T0), _item("B", 40.0, T0)], T0)
    assert summary.status == "ok" and summary.items == 1
    assert summary.dropped == {"unstorable_price": 1}
    assert [o["instance_type"] for o in queries.current_offers(engine)] == ["B"]
