"""`/api/v1/signals?offer_id=N`: a spot offer's interruption signal over time (issue #51),
as the OpenAPI document states it, over a real server on the loopback; from two crawls of
the real AWS Spot Advisor capture, the second with the band moved."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.scheduler.test_api import check, get, served
from tests.storage.test_signal_series import ADVISOR, P5, T0, aws_items, crawl, moved


@pytest.fixture
def site(engine):
    crawl(engine, "aws", aws_items(ADVISOR, "2025-06-28", T0), T0)
    later = T0 + timedelta(days=2)
    crawl(engine, "aws", aws_items(moved(0), "2025-07-05", later), later)
    with served(lambda: engine) as base:
        status, _, body = get(base + "/api/v1/openapi.json")
        assert status == 200
        yield base + "/api/v1", json.loads(body)


def offer_id(base: str, region: str, instance_type: str) -> int:
    _, _, body = get(f"{base}/offers?source=aws&pricing=spot&region={region}&limit=0")
    [offer] = [o for o in json.loads(body)["offers"] if o["instance_type"] == instance_type]
    return offer["id"]


def test_an_offers_signal_changes_as_documented(site):
    base, spec = site
    oid = offer_id(base, *P5)
    status, _, body = get(f"{base}/signals?offer_id={oid}")
    assert status == 200, body
    data = check(spec, "/signals", 200, body)
    assert (data["offer_id"], data["count"]) == (oid, 2)
    assert [(p["band"], p["as_of"], p["risk"], p["valid_to"]) for p in data["signals"]] == [
        (">20%", "2025-06-28", "high", "2026-12-03T12:00:00Z"),
        ("<5%", "2025-07-05", "low", None)]
    # the offer itself carries the newest, as /offers always did
    _, _, body = get(f"{base}/offers?source=aws&pricing=spot&region=us-east-1&limit=0")
    [offer] = [o for o in json.loads(body)["offers"] if o["id"] == oid]
    assert offer["interruption_as_of"] == "2025-07-05"


def test_no_signal_is_an_empty_series_and_offer_id_is_required(site):
    base, spec = site
    oid = offer_id(base, "us-east-1", "g6f.xlarge")  # no band in the capture: unknown
    status, _, body = get(f"{base}/signals?offer_id={oid}")
    assert check(spec, "/signals", status, body) == {"offer_id": oid, "count": 0,
                                                       "signals": []}
    status, _, body = get(f"{base}/signals")
    assert status == 400
    assert check(spec, "/signals", 400, body) == {"error": "give offer_id (from /offers)"}
    assert spec["paths"]["/signals"]["get"]["parameters"][0]["required"] is True
