"""A spot offer's interruption signal, with its source and date, wherever a user reads an
offer: the JSON API (valid against its OpenAPI document) and the Python API (the offer's
attributes), the web page and the exports; and what each provider publishes, in
`gpuradar sources`."""

from __future__ import annotations

import json

from gpuradar import api
from gpuradar.scheduler.web import render
from gpuradar.storage.export import export
from tests.clirun import gpuradar_json
from tests.scheduler.test_api import check, get, served
from tests.storage.test_index import T0, crawl, item

# The AWS Spot Advisor band of p5.48xlarge in us-east-1 in the feed the demo replays (the
# real one of 2025-06-28: gpuradar/recordings/aws/provenance.json).
BAND = {"interruption": ">20%", "interruption_source": "AWS Spot Advisor",
        "interruption_as_of": "2025-06-28", "savings_pct": 52}


def _market(engine) -> None:
    banded = item("aws", "p5.48xlarge", 2.59, pricing="spot")
    banded.attributes.update(BAND)
    crawl(engine, "aws", [banded, item("aws", "p5.4xlarge", 2.63, pricing="spot", count=1),
                          item("aws", "p5.48xlarge", 6.88)], T0)
    crawl(engine, "azure", [item("azure", "Standard_NC24ads_A100_v4", 2.10, pricing="spot")],
          T0)
    crawl(engine, "gcp", [item("gcp", "a3-highgpu-8g", 2.25, pricing="spot")], T0)


def test_the_api_gives_each_spot_offers_band_with_source_and_date(engine):
    _market(engine)
    with served(lambda: engine) as base:
        doc = json.loads(get(f"{base}/api/v1/openapi.json")[2])
        status, _, body = get(f"{base}/api/v1/offers?limit=0")
        offers = check(doc, "/offers", status, body)["offers"]
    by = {(o["source"], o["instance_type"], o["pricing"]): o["attributes"] for o in offers}
    assert {k: by[("aws", "p5.48xlarge", "spot")][k] for k in BAND} == BAND
    assert "interruption" not in by[("aws", "p5.4xlarge", "spot")]
    # The Python API gives the same attributes.
    with api.Store(engine) as store:
        (p5,) = [o for o in store.offers("H100", pricing="spot") if o.source == "aws"
                 and o.instance_type == "p5.48xlarge"]
    assert {k: p5.attributes[k] for k in BAND} == BAND


def test_every_offer_carries_its_signal_in_the_same_fields_on_every_surface(engine, tmp_path):
    """The interruption_* fields of OFFER_SCHEMA: a band with its source, date and monthly
    share (AWS), an unread one saying why (Azure without credentials), none published (GCP),
    and nothing for an on-demand offer; the same in the JSON API (valid against its OpenAPI
    document), the Python API and the CSV export."""
    import csv

    _market(engine)
    with served(lambda: engine) as base:
        doc = json.loads(get(f"{base}/api/v1/openapi.json")[2])
        status, _, body = get(f"{base}/api/v1/offers?limit=0")
        offers = check(doc, "/offers", status, body)["offers"]
    by = {(o["source"], o["instance_type"], o["pricing"]): o for o in offers}
    p5 = by[("aws", "p5.48xlarge", "spot")]
    assert {k: p5[k] for k in p5 if k.startswith("interruption")} == {
        "interruption": "interruption >20%/month (AWS Spot Advisor, 2025-06-28)",
        "interruption_kind": "interruption rate", "interruption_source": "AWS Spot Advisor",
        "interruption_as_of": "2025-06-28", "interruption_monthly_low": 0.2,
        "interruption_monthly_high": None}
    azure = by[("azure", "Standard_NC24ads_A100_v4", "spot")]
    assert azure["interruption_kind"] == "unknown" and azure["interruption"].endswith(
        "not read") and azure["interruption_source"] is None
    assert by[("gcp", "a3-highgpu-8g", "spot")]["interruption"] == (
        "no interruption signal published")
    assert all(v is None for k, v in by[("aws", "p5.48xlarge", "on_demand")].items()
               if k.startswith("interruption"))
    with api.Store(engine) as store:
        [py] = [o for o in store.offers(pricing="spot") if o.instance_type == "p5.48xlarge"]
    assert (py.interruption_kind, py.interruption_monthly_low, py.interruption_as_of) == (
        "interruption rate", 0.2, "2025-06-28")
    export(engine, tmp_path / "export", ["csv"])
    with (tmp_path / "export" / "offers.csv").open(newline="") as f:
        rows = {(r["source"], r["instance_type"], r["pricing"]): r for r in csv.DictReader(f)}
    row = rows[("aws", "p5.48xlarge", "spot")]
    assert (row["interruption_source"], row["interruption_monthly_low"],
            row["interruption_monthly_high"]) == ("AWS Spot Advisor", "0.2", "")
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert manifest["format_version"] == 4


def test_an_unread_signal_says_why_and_a_missing_one_says_none(engine):
    _market(engine)
    for source, said in (("azure", "spot eviction rates (Azure Resource Graph) need "
                                   "AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and "
                                   "AZURE_SUBSCRIPTION_ID, not read"),
                         ("gcp", "no interruption signal published")):
        page = render(engine, {"pricing": ["spot"], "source": [source]}, now=T0)
        table = page[page.index('<table id="cheapest">'):page.index("</table>")]
        assert f'<span class="muted signal">{said}</span>' in table, source


def test_the_page_shows_the_signal_under_a_spot_offers_pricing(engine):
    _market(engine)
    page = render(engine, {"pricing": ["spot"], "source": ["aws"]}, now=T0)
    table = page[page.index('<table id="cheapest">'):page.index("</table>")]
    assert ('<td class="pricing">spot<br>\n<span class="muted signal">interruption &gt;20%/month '
            '(AWS Spot Advisor, 2025-06-28)</span>') in table


def test_the_page_shows_a_spot_offers_band_history_where_it_has_one(engine):
    """Under a spot row, the bands its provider published over time (from the series the
    crawls stored, each from the day first read), the last four; an offer whose band never
    changed shows only its signal."""
    from datetime import timedelta

    _market(engine)  # p5.48xlarge: >20% from T0
    for n, band in enumerate(("10-15%", "5-10%", "<5%", "15-20%"), start=1):
        at = T0 + timedelta(days=n)
        banded = item("aws", "p5.48xlarge", 2.59, pricing="spot", at=at)
        banded.attributes.update(BAND, interruption=band)
        crawl(engine, "aws", [banded, item("aws", "p5.4xlarge", 2.63, pricing="spot",
                                           count=1, at=at)], at)
    page = render(engine, {"pricing": ["spot"], "source": ["aws"]}, now=T0 + timedelta(days=5))
    table = page[page.index('<table id="cheapest">'):page.index("</table>")]
    assert ('<span class="muted signal bands">band history: 1 earlier, 10-15% from '
            '2026-11-02, 5-10% from 2026-11-03, &lt;5% from 2026-11-04, 15-20% from '
            '2026-11-05</span>') in table
    assert table.count("band history") == 1  # p5.4xlarge publishes no band

    crawl(engine, "alibaba", [item("alibaba", "ecs.gn7i-c8g1.2xlarge", 0.5, pricing="spot",
                                   count=1)], T0)
    advice = item("alibaba", "ecs.gn7i-c8g1.2xlarge", 0.5, pricing="spot", count=1)
    advice.attributes.update(interruption="0-3%", interruption_source="Alibaba "
                             "DescribeSpotAdvice", interruption_as_of="2026-11-01")
    crawl(engine, "alibaba", [advice], T0 + timedelta(hours=1))
    page = render(engine, {"pricing": ["spot"], "source": ["alibaba"]}, now=T0)
    assert "band history" not in page  # one band, shown by its signal line


def test_the_page_shows_alibaba_and_azure_bands_with_source_and_date(engine):
    advice = item("alibaba", "ecs.gn7i-c8g1.2xlarge", 0.50, pricing="spot", count=1)
    advice.attributes.update(interruption="0-3%", interruption_rate=1.2,
                             interruption_source="Alibaba DescribeSpotAdvice",
                             interruption_as_of="2026-12-06", interruption_window="30 days")
    evicted = item("azure", "Standard_NC24ads_A100_v4", 0.60, pricing="spot", count=1)
    evicted.attributes.update(interruption="20+", interruption_source="Azure Resource Graph",
                              interruption_as_of="2026-12-06")
    crawl(engine, "alibaba", [advice], T0)
    crawl(engine, "azure", [evicted], T0)
    for source, said in (("alibaba", "interruption 0-3%/30 days (average 1.2%) (Alibaba "
                                     "DescribeSpotAdvice, 2026-12-06)"),
                         ("azure", "interruption 20+% (Azure Resource Graph, 2026-12-06)")):
        page = render(engine, {"pricing": ["spot"], "source": [source]}, now=T0)
        table = page[page.index('<table id="cheapest">'):page.index("</table>")]
        assert f'<span class="muted signal">{said}</span>' in table, (source, table)


def test_the_exports_carry_the_band_its_source_and_date(engine, tmp_path):
    _market(engine)
    export(engine, tmp_path / "export", ["jsonl"])
    lines = (tmp_path / "export" / "offers.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    (p5,) = [r for r in rows if r["instance_type"] == "p5.48xlarge" and r["pricing"] == "spot"]
    attributes = p5["attributes"] if isinstance(p5["attributes"], dict) else json.loads(
        p5["attributes"])
    assert {k: attributes[k] for k in BAND} == BAND


def test_sources_say_what_each_provider_publishes_about_interruptions(db_url):
    said = {r["source"]: r["spot_signal"] for r in gpuradar_json("sources", db_url=db_url)}
    assert said["aws"].startswith("AWS Spot Advisor interruption band")
    assert said["alibaba"].startswith("DescribeSpotAdvice release-rate band per instance "
                                      "type and zone, last 30 days")
    assert said["azure"].startswith("spot eviction rates (Azure Resource Graph) need "
                                    "AZURE_TENANT_ID")
    for name in ("gcp", "tencent", "huawei", "oci"):
        assert said[name] == "no interruption signal published", name
    assert said["vastai"].startswith("host reliability score")
    assert said["runpod"] is None  # RunPod ended spot pods: no spot offers to signal
