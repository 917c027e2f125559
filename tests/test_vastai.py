"""Vast.ai bundles: the parser on a real capture and on offers in the same format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.vastai import VastaiSpider
from scrapy.http import TextResponse

FIX = Path(__file__).parent / "fixtures" / "vastai"


def items(name: str):
    resp = TextResponse(url="https://console.vast.ai/api/v0/bundles/",
                        body=(FIX / name).read_bytes(), encoding="utf-8")
    return list(VastaiSpider().parse(resp))


def test_real_capture_gives_on_demand_and_interruptible_offers():
    out = items("bundles_h100_sxm_real.json")
    assert len(out) == 4  # 2 offers x (on-demand, spot)
    od = next(i for i in out if i.pricing == "on_demand" and i.instance_type.startswith("148199"))
    assert od.instance_type == "148199:1xH100_SXM"  # machine, count, GPU: not the ask id
    assert od.price == pytest.approx(1.3867407407407408)  # dph_total, storage included
    assert od.region == "US" and od.available is True and od.currency == "USD"
    assert od.gpu_memory_gb == pytest.approx(79.6, abs=0.1)
    spot = next(i for i in out if i.pricing == "spot" and i.instance_type.startswith("148199"))
    # min_bid plus the same storage cost the on-demand price carries
    assert spot.price == pytest.approx(0.39999999999999997 + 7.407407407407407e-05)
    assert od.attributes["reliability"] == pytest.approx(0.9089707)
    city = next(i for i in out if i.instance_type.startswith("59380"))
    assert city.region == "US" and city.attributes["location"] == "Washington, US"


def test_search_is_per_gpu_model_plus_one_catch_all():
    from scrapy.utils.test import get_crawler

    spider = VastaiSpider.from_crawler(get_crawler(VastaiSpider))
    q = spider.query("H100 SXM")
    assert q["gpu_name"] == {"eq": "H100 SXM"} and q["rentable"] == {"eq": True}
    assert q["rented"] == {"eq": False}
    assert "gpu_name" not in spider.query(None)


def test_missing_field_is_a_clear_error(tmp_path):
    data = json.loads((FIX / "bundles_h100_sxm_real.json").read_text())
    del data["offers"][1]["machine_id"]
    resp = TextResponse(url="https://x/", body=json.dumps(data).encode(), encoding="utf-8")
    with pytest.raises(ParseError, match=r"vastai.*'machine_id' is missing \(in offers\[1\]\)"):
        list(VastaiSpider().parse(resp))
