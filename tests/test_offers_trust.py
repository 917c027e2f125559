"""Offers you can trust (issue #15): uncatalogued products are reported, unreadable and
implausible prices never close or replace an offer, one price per offer per crawl, and a
crawl that suddenly lists far fewer offers closes nothing until confirmed."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.provider_server import Reply, serve_standard

FIXTURES = Path(__file__).parent / "fixtures"


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
