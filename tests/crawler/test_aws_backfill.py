"""AWS: 90 days of spot history on the first crawl (DescribeSpotPriceHistory back-fill), and
the patterns of that history -- the spider's requests and pages, the store's back-dated
change points, and `gpuradar crawl / history / patterns` on a real crawl of a loopback EC2
serving the answer in botocore's format (tests/fixtures/aws/SOURCE.md)."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from scrapy import Request

from gpuradar.core.backfill import PriceHistory
from gpuradar.core.items import PriceItem
from gpuradar.core.providers.aws import BACKFILL_DAYS, BACKFILL_MAX_PAGES
from tests.clirun import gpuradar, gpuradar_json
from tests.crawler.test_aws import FAKE_AWS, FIX, config, crawl, make_spider
from tests.helpers import response
from tests.provider_server import ProviderServer, Reply
from tests.routes.aws import XML, ec2_handler

PAGE1 = FIX / "spot_history_90d_us-east-1_page1.xml"
PAGE2 = FIX / "spot_history_90d_us-east-1_page2.xml"
NOW = FIX / "spot_history_90d_us-east-1_now.xml"
# The real us-east-1 spot prices of the recorded answer (SOURCE.md), per GPU-hour.
P5_48 = 20.738 / 8
P5_4 = 2.6295


def signing_spider(**options: Any):
    spider = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="secret", **options)
    spider.aws_credentials = spider.credential_source(spider.settings).get_frozen_credentials()
    return spider


def form(request: Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(request.body.decode()).items()}


def regions_answer(spider, stored: frozenset[tuple] | None) -> list[Request]:
    spider.stored_offer_keys = stored
    return [r for r in spider.parse_describe_regions(response(FIX / "describe_regions.xml"),
                                                     region="us-east-1")
            if form(r)["Action"] == "DescribeSpotPriceHistory"]


# -- the spider --------------------------------------------------------------------------
def test_a_first_crawl_asks_each_region_for_90_days_and_later_ones_for_the_hour():
    spider = signing_spider(capacity_blocks=False)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    first = regions_answer(spider, frozenset())
    assert len(first) == 3  # us-east-1, us-west-2, eu-north-1 (the enabled regions)
    for request in first:
        asked = form(request)
        assert asked["StartTime"] == f"{hour - timedelta(days=BACKFILL_DAYS):%Y-%m-%dT%H:%M:%SZ}"
        assert (asked["MaxResults"], asked["ProductDescription.1"]) == ("1000", "Linux/UNIX")
        assert request.cb_kwargs["backfill"] is True
    # us-east-1 has a per-zone spot offer stored: the current hour there, 90 days elsewhere
    stored = frozenset({("us-east-1", "us-east-1a", "p5.48xlarge", "spot"),
                        ("us-west-2", "", "p5.48xlarge", "spot"),      # regional: no zone
                        ("eu-north-1", "eu-north-1a", "g5.xlarge", "on_demand")})
    later = {r.url.split("//")[1].split(".")[1]: r for r in regions_answer(spider, stored)}
    assert form(later["us-east-1"])["StartTime"] == f"{hour:%Y-%m-%dT%H:%M:%SZ}"
    assert [later[r].cb_kwargs["backfill"] for r in ("us-east-1", "us-west-2", "eu-north-1")
            ] == [False, True, True]
    # no storage (`parse`), or the option off: never a back-fill
    assert not any(r.cb_kwargs["backfill"] for r in regions_answer(spider, None))
    off = signing_spider(capacity_blocks=False, backfill=False)
    assert not any(r.cb_kwargs["backfill"] for r in regions_answer(off, frozenset()))


def test_the_back_fill_reads_every_page_then_gives_the_offers_and_their_history():
    spider = signing_spider()
    out = list(spider.parse_spot_history(response(PAGE1), region="us-east-1", types=("x",),
                                         backfill=True, page=1))
    [follow] = out  # the next page first: nothing handed on from a part of the history
    assert isinstance(follow, Request) and form(follow)["NextToken"].startswith("eyJ2")
    assert follow.cb_kwargs["backfill"] is True and follow.cb_kwargs["page"] == 2
    out = list(spider.parse_spot_history(response(PAGE2), region="us-east-1", types=("x",),
                                         backfill=True, page=2))
    offers = {(i.zone, i.instance_type): i for i in out if isinstance(i, PriceItem)}
    history = {h.key.zone + " " + h.key.instance_type: h for h in out
               if isinstance(h, PriceHistory)}
    # the live offer is the newest price of each zone and type, across both pages
    assert offers[("us-east-1a", "p5.48xlarge")].attributes["price_since"] == \
        "2026-07-02T08:15:40.000Z"
    assert offers[("us-east-1c", "g5.xlarge")].price == "0.517900"
    # every Linux/UNIX price is history, at its own time; the Windows one is not
    at = lambda s: int(datetime.fromisoformat(s).timestamp())  # noqa: E731
    assert sorted(history["us-east-1a p5.48xlarge"].points) == [
        (at("2026-05-09T14:02:11+00:00"), 20.738), (at("2026-07-02T08:15:40+00:00"), 20.738)]
    assert history["us-east-1a g6e.xlarge"].points == [(at("2026-05-10T22:10:05+00:00"), 1.6013)]
    assert set(history) == {"us-east-1a p5.48xlarge", "us-east-1b p5.4xlarge",
                            "us-east-1a g6e.xlarge", "us-east-1c g5.xlarge"}
    h = history["us-east-1a p5.48xlarge"]
    assert (h.source, h.key.pricing, h.gpu_count, h.currency, h.days) == (
        "aws", "spot", 8, "USD", 90)
    assert spider.history == {}  # nothing kept once handed on


def test_a_history_past_the_page_cap_is_not_stored_and_the_hour_is_asked_instead(caplog):
    spider = signing_spider()
    out = list(spider.parse_spot_history(response(PAGE1), region="us-east-1",
                                         types=("p5.48xlarge",), backfill=True,
                                         page=BACKFILL_MAX_PAGES))
    [instead] = out
    assert instead.cb_kwargs["backfill"] is False and "NextToken" not in form(instead)
    assert spider.crawler.stats.get_value("gpuradar/skipped/backfill_over_cap") == 1
    assert "does not fit 20 pages of 1000; not back-filled" in caplog.text


def test_an_unreadable_price_is_counted_not_kept_as_history():
    spider = signing_spider()
    text = PAGE2.read_text().replace("<spotPrice>0.517900</spotPrice>",
                                     "<spotPrice>N/A</spotPrice>", 1)
    out = list(spider.parse_spot_history(response(text.encode(), kind="xml"),
                                         region="us-east-1", types=("x",), backfill=True))
    [history] = [h for h in out if isinstance(h, PriceHistory)]
    assert (len(history.points), history.unreadable) == (1, 1)  # the readable one of two


# -- a real crawl ------------------------------------------------------------------------
def ec2_with_history(server: ProviderServer, page2: bytes | None = None
                     ) -> list[dict[str, str]]:
    """us-east-1 answers DescribeSpotPriceHistory from the 90-day recording when asked for
    more than a day back (two pages), else with the current hour; the rest as usual.
    Returns the forms of the history requests."""
    asked: list[dict[str, str]] = []

    def handler(req):
        f = {k: v[0] for k, v in parse_qs(req.body.decode()).items()}
        if f.get("Action") != "DescribeSpotPriceHistory":
            return ec2_handler(req)
        asked.append(f)
        start = datetime.fromisoformat(f["StartTime"].replace("Z", "+00:00"))
        if datetime.now(UTC) - start < timedelta(days=1):
            return Reply(body=NOW.read_bytes(), content_type=XML)
        if f.get("NextToken"):
            return Reply(body=page2 or PAGE2.read_bytes(), content_type=XML)
        return Reply(body=PAGE1.read_bytes(), content_type=XML)

    server.route("POST", "/ec2/us-east-1/", handler)
    return asked


def hourly_by_hand(first_point: datetime, a_from: datetime, last: datetime
                   ) -> dict[datetime, float]:
    """The H100 spot price per GPU-hour at each whole hour of zones a and b, by hand: from
    the first whole hour after p5.4xlarge's point (zone b) only its price is in force, from
    p5.48xlarge's (zone a) on the lower of the two."""
    hour = first_point.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    out = {}
    while hour <= last:
        out[hour] = min(P5_4, P5_48) if hour >= a_from else P5_4
        hour += timedelta(hours=1)
    return out


def test_first_crawl_back_fills_90_days_that_history_and_patterns_show(
        tmp_path: Path, provider_server: ProviderServer, db_url: str):
    cfg = config(tmp_path, provider_server, aws={"regions": ["us-east-1"],
                                                 "capacity_blocks": False})
    asked = ec2_with_history(provider_server)
    before = datetime.now(UTC)
    result = crawl(cfg, db_url, "aws", env=FAKE_AWS)["aws"]
    assert result["status"] == "ok", result
    assert [(f["StartTime"][:10], "NextToken" in f) for f in asked] == [
        (f"{before - timedelta(days=90):%Y-%m-%d}", False),
        (f"{before - timedelta(days=90):%Y-%m-%d}", True)]
    # four types in one region; p5.48xlarge's two equal prices are one change point
    assert result["backfilled"] == {"days": 90, "points": 4, "refused": 0,
                                    "regions": ["us-east-1"], "types": [
                                        "g5.xlarge", "g6e.xlarge", "p5.48xlarge",
                                        "p5.4xlarge"]}

    # the offer's history starts at its own first price, months before this crawl
    spans = gpuradar_json("history", "aws", "p5.48xlarge", "--region", "us-east-1a",
                          "--pricing", "spot", config=cfg, db_url=db_url)
    assert spans[0]["valid_from"].startswith("2026-05-09T14:02:11")
    assert spans[0]["price"] == 20.738 and not spans[0]["open"]
    assert spans[-1]["open"] and len(spans) == 2  # the crawl's own observation
    # `history --gpu` over 90 days: a price in every slice, not only since this crawl
    series = gpuradar_json("history", "--gpu", "H100", "--pricing", "spot", "--days", "90",
                           config=cfg, db_url=db_url)
    assert len(series) == 60 and None not in {s["cheapest_usd_per_gpu_hour"] for s in series}
    # before this crawl: zone a's back-filled price (the regional offers start now)
    assert series[0]["cheapest_usd_per_gpu_hour"] == pytest.approx(P5_48)

    # a second crawl asks for the hour, stores no history again, closes nothing
    again = crawl(cfg, db_url, "aws", env=FAKE_AWS)["aws"]
    assert again["status"] == "ok" and again["backfilled"] is None
    assert (again["changed"], again["closed"], again["new_offers"]) == (0, 0, 0)
    assert asked[-1]["StartTime"][:10] == f"{datetime.now(UTC):%Y-%m-%d}"
    def points(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(s["valid_from"], s["valid_to"], s["price"]) for s in rows]

    assert points(gpuradar_json("history", "aws", "p5.48xlarge", "--region", "us-east-1a",
                                "--pricing", "spot", config=cfg, db_url=db_url)
                  ) == points(spans)

    # the patterns of that history, recomputed here by hand (docs/patterns.md)
    [found] = gpuradar_json("patterns", "H100", "--pricing", "spot", "--region",
                            "us-east-1[ab]", "--days", "3660", config=cfg, db_url=db_url)
    last = datetime.fromisoformat(found["last"])
    assert before.replace(minute=0, second=0, microsecond=0) <= last <= datetime.now(UTC)
    hourly = hourly_by_hand(datetime(2026, 5, 8, 3, 41, 27, tzinfo=UTC),
                            datetime(2026, 5, 9, 14, 2, 11, tzinfo=UTC), last)
    assert found["first"] == "2026-05-08T04:00:00Z"
    assert found["hourly_samples"] == len(hourly)
    # weekly profile: the mean of each hour of the week (Monday 00:00 UTC is 0) and its weeks
    buckets: dict[int, list[float]] = {}
    for hour, price in hourly.items():
        buckets.setdefault(hour.weekday() * 24 + hour.hour, []).append(price)
    profile = found["weekly_profile"]
    assert [b["hour_of_week"] for b in profile] == list(range(168))
    for b in profile:
        assert b["weeks"] == len(buckets[b["hour_of_week"]])
        assert b["mean_usd_per_gpu_hour"] == pytest.approx(statistics.fmean(
            buckets[b["hour_of_week"]]), rel=1e-12)
    assert found["weeks"] == min(len(v) for v in buckets.values())
    low = min(statistics.fmean(v) for v in buckets.values())
    assert {c["hour_of_week"] for c in found["cheapest_hours"]} == {
        h for h, v in buckets.items() if statistics.fmean(v) == pytest.approx(low, rel=1e-12)}
    # the hours of 2026-05-08/09 before zone a's price are dearer: not among the cheapest
    assert (4 * 24 + 5) not in {c["hour_of_week"] for c in found["cheapest_hours"]}  # Fri 05
    # volatility: sample stdev of the daily log changes at 00:00 UTC
    midnights = sorted(h for h in hourly if h.hour == 0)
    changes = [math.log(hourly[d] / hourly[d - timedelta(days=1)]) for d in midnights
               if d - timedelta(days=1) in hourly]
    assert found["volatility_daily_changes"] == len(changes)
    assert found["volatility"] == pytest.approx(statistics.stdev(changes), rel=1e-9)
    assert changes[0] == pytest.approx(math.log(P5_48 / P5_4)) and set(changes[1:]) == {0.0}
    assert found["trend_7d"] == 0.0 and found["trend_30d"] == 0.0
    assert found["not_enough_history"] == []
    # the same from the JSON API, as its OpenAPI document states it
    import json
    from urllib.parse import quote

    from gpuradar.storage.db import open_database
    from tests.scheduler.test_api import check, get, served

    engine = open_database(db_url)
    with served(lambda: engine) as base:
        status, _, doc = get(f"{base}/api/v1/openapi.json")
        spec = json.loads(doc)
        status, _, body = get(f"{base}/api/v1/patterns?gpu=H100&pricing=spot&region="
                              f"{quote('us-east-1[ab]')}&days=3660")
        assert status == 200, body
        answer = check(spec, "/patterns", 200, body)
        status, _, body = get(f"{base}/api/v1/patterns?pricing=spot")
        assert status == 400 and b"give gpu" in body
    engine.dispose()
    [api] = answer["patterns"]
    assert api["first"] == found["first"] and api["volatility"] == pytest.approx(
        found["volatility"], rel=1e-3)
    if api["last"] == found["last"]:  # unless an hour turned between the two reads
        assert api == found
    # the web page draws that weekly profile for a GPU picked in its form
    from gpuradar.scheduler.web import render

    html = render(open_database(db_url), {"gpu": ["H100"], "pricing": ["spot"],
                                          "region": ["us-east-1[ab]"]})
    weekly = html[html.index('<div class="charts" id="weekly">'):]
    # over the page's 90 days (the command's default too): May's dearer hours are older
    [last90] = gpuradar_json("patterns", "H100", "--pricing", "spot", "--region",
                             "us-east-1[ab]", config=cfg, db_url=db_url)
    assert weekly.count('<rect class="hour') == 168
    assert weekly.count('<rect class="hour cheapest"') == len(last90["cheapest_hours"])
    # every hour at zone a's price since May: one price the whole week, said so
    assert len(last90["cheapest_hours"]) == 168
    assert f"the same every hour of the week, $2.5923 ({last90['weeks']} weeks)" in weekly
    assert last90["volatility"] == 0.0
    assert "Pick a GPU above" in render(open_database(db_url), {})
    # and its 90-day price chart starts at the left edge: a price from the range's first day
    from gpuradar.scheduler.web import PAD_L

    page = render(open_database(db_url), {"gpu": ["H100"], "pricing": ["spot"],
                                          "region": ["us-east-1[ab]"], "range": ["90d"]})
    chart = page[page.index('<div class="charts" id="history">'):page.index('id="weekly"')]
    assert f'd="M{PAD_L:.1f},' in chart
    # the same, as the table says it
    table = gpuradar("patterns", "H100", "--pricing", "spot", "--region", "us-east-1[ab]",
                     "--days", "3660", config=cfg, db_url=db_url, env={"COLUMNS": "250"})
    assert table.returncode == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert f"{found['volatility'] * 100:.2f}%/day ({len(changes)} days)" in text
    assert "+0.0%" in text


def test_patterns_says_plainly_when_there_is_not_enough_history(
        tmp_path: Path, provider_server: ProviderServer, sqlite_url: str):
    cfg = config(tmp_path, provider_server, aws={"regions": ["us-east-1"],
                                                 "capacity_blocks": False})
    assert crawl(cfg, sqlite_url, "aws")["aws"]["status"] == "ok"  # no credentials: no history
    table = gpuradar("patterns", "H100", "--pricing", "spot", config=cfg, db_url=sqlite_url,
                     env={"COLUMNS": "250"})
    assert table.returncode == 0, table.stderr
    assert "not enough history" in table.stdout
    [found] = gpuradar_json("patterns", "H100", "--pricing", "spot", config=cfg,
                            db_url=sqlite_url)
    assert found["volatility"] is None and found["weekly_profile"] == []
    assert found["not_enough_history"] == ["no whole hour of prices observed in the window read"]
    bad = gpuradar("patterns", "H100", "--days", "0", config=cfg, db_url=sqlite_url)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        "--days must be more than 0 and at most 3660, not 0")


def test_the_crawl_summary_says_what_was_back_filled(
        tmp_path: Path, provider_server: ProviderServer, sqlite_url: str):
    cfg = config(tmp_path, provider_server, aws={"regions": ["us-east-1"],
                                                 "capacity_blocks": False})
    ec2_with_history(provider_server)
    proc = gpuradar("crawl", "aws", config=cfg, db_url=sqlite_url,
                    env={**FAKE_AWS, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "aws: back-filled 90 days: 4 price points for 4 types in 1 region" in proc.stdout
    assert FAKE_AWS["AWS_SECRET_ACCESS_KEY"] not in proc.stdout + proc.stderr
    # the next crawl has nothing to back-fill, and says nothing of it
    again = gpuradar("crawl", "aws", config=cfg, db_url=sqlite_url,
                     env={**FAKE_AWS, "COLUMNS": "200"})
    assert again.returncode == 0 and "back-filled" not in again.stdout


def test_an_unreadable_or_implausible_back_dated_price_is_counted_never_stored(
        tmp_path: Path, provider_server: ProviderServer, sqlite_url: str):
    from sqlalchemy import func, select

    from gpuradar.storage.db import open_database
    from gpuradar.storage.models import CHANGE

    cfg = config(tmp_path, provider_server, aws={"regions": ["us-east-1"],
                                                 "capacity_blocks": False})
    # g5.xlarge's older price unreadable, its newer one far past the plausible range
    text = PAGE2.read_text().replace("<spotPrice>0.517900</spotPrice>",
                                     "<spotPrice>99999.000000</spotPrice>", 1)
    text = text.replace("<spotPrice>0.517900</spotPrice>", "<spotPrice>N/A</spotPrice>", 1)
    ec2_with_history(provider_server, page2=text.encode())
    result = crawl(cfg, sqlite_url, "aws", env=FAKE_AWS)["aws"]
    assert result["backfilled"]["refused"] == 2
    assert "g5.xlarge" not in result["backfilled"]["types"]
    # and the live offer of that absurd price is quarantined as any live price is
    assert result["dropped"].get("implausible_price") == 1
    engine = open_database(sqlite_url)
    with engine.connect() as conn:
        assert conn.execute(select(func.max(CHANGE.c.price_micros))).scalar() < 99_999_000_000
