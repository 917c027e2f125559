"""Routes for alibaba, tencent, huawei and autodl: each answers like the provider's API, from
the fixtures in tests/fixtures/<source>/ (see their SOURCE.md). Paths are the providers' real
paths, so recordings made here replay against the real base URLs."""

from __future__ import annotations

import json
import threading

from tests.provider_server import Reply, Request, fixture


def _json(data) -> Reply:
    return Reply(body=json.dumps(data, ensure_ascii=False).encode())


# -- Alibaba ------------------------------------------------------------------------------------
CHINA_FILE = "/aliyun/ecs-price-info/2.0.433/price/download/instancePrice.json"
INTL_FILE = "/aliyun/ecs-price-info-intl/2.0.421/price/download/instancePrice.json"


def alibaba_file_handler(req: Request) -> Reply:
    name = "instancePrice_intl_gpu.json" if "-intl/" in req.path else "instancePrice_china_gpu.json"
    return Reply(body=fixture(f"alibaba/{name}"))


def alibaba_page_handler(req: Request) -> Reply:
    return Reply(body=fixture("alibaba/pricing_page_with_version.html"),
                 content_type="text/html; charset=utf-8")


_NONCES: set[str] = set()
_NONCE_LOCK = threading.Lock()


def alibaba_api_handler(req: Request) -> Reply:
    """The ECS RPC API: answers by Action (only cn-hangzhou has GPU stock here)."""
    q = {k: v[0] for k, v in req.query.items()}
    action = q.get("Action")
    for required in ("Signature", "SignatureNonce", "AccessKeyId", "Timestamp"):
        if required not in q:
            return Reply(400, json.dumps({"Code": "MissingParameter",
                                          "Message": f"{required} is mandatory"}).encode())
    with _NONCE_LOCK:
        reused = q["SignatureNonce"] in _NONCES
        _NONCES.add(q["SignatureNonce"])
    if reused:  # Alibaba refuses a nonce it has seen (replay protection)
        return Reply(400, json.dumps({"Code": "SignatureNonceUsed", "Message":
                                      "Specified signature nonce was used already."}).encode())
    if action == "DescribeInstanceTypes":
        page = 2 if q.get("NextToken") else 1
        return Reply(body=fixture(f"alibaba/describe_instance_types_page{page}.json"))
    if action == "DescribeRegions":
        return Reply(body=fixture("alibaba/describe_regions.json"))
    if action == "DescribeAvailableResource":
        if q.get("RegionId") != "cn-hangzhou":
            return _json({"RequestId": "0", "AvailableZones": {"AvailableZone": []}})
        kind = "spot" if q.get("SpotStrategy") else "postpaid"
        return Reply(body=fixture(f"alibaba/describe_available_resource_{kind}.json"))
    if action == "DescribePrice":
        data = json.loads(fixture("alibaba/describe_price_gn7i.json"))
        if q.get("InstanceType") != "ecs.gn7i-c8g1.2xlarge":
            price = data["PriceInfo"]["Price"]
            price.update({"OriginalPrice": 34.83, "TradePrice": 34.83})
            price["DetailInfos"]["DetailInfo"][0].update({"OriginalPrice": 34.5,
                                                          "TradePrice": 34.5})
        return _json(data)
    if action == "DescribeSpotAdvice":
        # The real API answers only the types asked (InstanceTypes.N, at most 10).
        asked = {v for k, v in q.items() if k.startswith("InstanceTypes.")}
        if not asked or len(asked) > 10:
            return Reply(400, json.dumps({"Code": "InvalidParameter", "Message":
                                          "InstanceTypes"}).encode())
        data = json.loads(fixture("alibaba/describe_spot_advice_gn7i.json"))
        data["RegionId"] = q.get("RegionId")
        for zone in data["AvailableSpotZones"]["AvailableSpotZone"]:
            res = zone["AvailableSpotResources"]
            res["AvailableSpotResource"] = [r for r in res["AvailableSpotResource"]
                                            if r["InstanceType"] in asked]
        return _json(data)
    if action == "DescribeSpotPriceHistory":
        return Reply(body=fixture("alibaba/describe_spot_price_history_gn7i.json"))
    return Reply(404, b'{"Code": "InvalidAction.NotFound", "Message": "unknown action"}')


# -- Tencent ------------------------------------------------------------------------------------
def tencent_handler(req: Request) -> Reply:
    """DescribeRegions has an empty body; DescribeZoneInstanceConfigInfos filters by charge
    type and family, like the API does."""
    payload = req.json() or {}
    filters = {f["Name"]: f["Values"] for f in payload.get("Filters", [])}
    if not filters:
        return Reply(body=fixture("tencent/describe_regions.json"))
    charge = filters.get("instance-charge-type", ["POSTPAID_BY_HOUR"])[0]
    name = {"POSTPAID_BY_HOUR": "postpaid", "SPOTPAID": "spotpaid"}.get(charge)
    if name is None:
        return _json({"Response": {"InstanceTypeQuotaSet": [], "RequestId": "0"}})
    data = json.loads(fixture(f"tencent/zone_instance_config_{name}_gpu.json"))
    families = filters.get("instance-family")
    if families:
        data["Response"]["InstanceTypeQuotaSet"] = [
            q for q in data["Response"]["InstanceTypeQuotaSet"] if q["InstanceFamily"] in families]
    return _json(data)


# -- Huawei -------------------------------------------------------------------------------------
HUAWEI_DOMAIN = "d78cbac186b744899480f25bd022f468"  # iam_auth_domains.json
HUAWEI_PROJECTS = {"0605767b3b00d2c62f05c00b4f1a2c3d": "cn-north-4",
                   "09a1c2e3f4b5a6978877665544332211": "cn-east-3"}


def huawei_iam_handler(req: Request) -> Reply:
    return Reply(body=fixture("huawei/iam_auth_projects.json"))


def huawei_domains_handler(req: Request) -> Reply:
    return Reply(body=fixture("huawei/iam_auth_domains.json"))


def huawei_flavors_handler(req: Request) -> Reply:
    project_id = req.path.split("/")[2]
    region = HUAWEI_PROJECTS.get(project_id)
    if region is None:
        return Reply(404, b'{"error": {"message": "project not found", "code": "Ecs.0001"}}')
    return Reply(body=fixture(f"huawei/flavors_{region}.json"))


def huawei_zones_handler(req: Request) -> Reply:
    region = HUAWEI_PROJECTS.get(req.path.split("/")[2])
    if region is None:
        return Reply(404, b'{"error": {"message": "project not found", "code": "Ecs.0001"}}')
    return Reply(body=fixture(f"huawei/availability_zones_{region}.json"))


def huawei_bss_handler(req: Request) -> Reply:
    """Rates each product from bss_list_prices.json; one unknown spec fails the whole batch
    with CBC.99006006, as BSS does. Amount = list price less 10 % (a made-up account
    discount), so `amount` and `official_website_amount` differ."""
    if req.headers.get("x-domain-id") != HUAWEI_DOMAIN:
        # AK/SK calls to a global service must name the account (Huawei's signing guide).
        return Reply(401, json.dumps({"error_code": "APIGW.0301", "error_msg":
                                      "Incorrect IAM authentication information: "
                                      "x-domain-id missing or wrong"}).encode())
    prices = json.loads(fixture("huawei/bss_list_prices.json"))
    body = req.json()
    infos = body["product_infos"]
    if len(infos) > 100:
        return Reply(400, b'{"error_code": "CBC.0100", "error_msg": "Too many products."}')
    if any(i["resource_spec"] not in prices for i in infos):
        return Reply(400, fixture("huawei/bss_error_product_not_found.json"))
    results = []
    for i in infos:
        price = prices[i["resource_spec"]]
        results.append({"id": i["id"], "product_id": "00301-" + i["id"], "measure_id": 1,
                        "amount": round(price * 0.9, 4), "official_website_amount": price,
                        "discount_amount": round(price * 0.1, 4)})
    total = sum(r["official_website_amount"] for r in results)
    return _json({"amount": round(total * 0.9, 4), "discount_amount": round(total * 0.1, 4),
                  "official_website_amount": total, "measure_id": 1, "currency": "CNY",
                  "product_rating_results": results})


# -- AutoDL -------------------------------------------------------------------------------------
def autodl_list_handler(req: Request) -> Reply:
    page = (req.json() or {}).get("page_index", 1)
    if page not in (1, 2):
        return _json({"code": "Success", "msg": "",
                      "data": {"list": [], "page_index": page, "page_size": 3, "max_page": 2}})
    return Reply(body=fixture(f"autodl/machine_list_page{page}.json"))


def autodl_stock_handler(req: Request) -> Reply:
    if (req.json() or {}).get("region_sign") == "westDC2":
        return Reply(body=fixture("autodl/gpu_stock_westDC2.json"))
    return _json({"code": "Success", "msg": "", "data": []})


ROUTES = {
    "alibaba.price_file_china": ("GET", "/aliyun/ecs-price-info/{version}/price/download/"
                                 "instancePrice.json", alibaba_file_handler),
    "alibaba.price_file_intl": ("GET", "/aliyun/ecs-price-info-intl/{version}/price/download/"
                                "instancePrice.json", alibaba_file_handler),
    "alibaba.file_china_2_0_433": ("GET", CHINA_FILE, alibaba_file_handler),
    "alibaba.file_intl_2_0_421": ("GET", INTL_FILE, alibaba_file_handler),
    "alibaba.discovery_china": ("GET", "/price/ecs/ecs-pricing/zh", alibaba_page_handler),
    "alibaba.discovery_intl": ("GET", "/en/product/ecs/pricing", alibaba_page_handler),
    # Alibaba's RPC API and Tencent's API 3.0 both POST to "/": told apart by the query.
    "alibaba.api": ("POST", "/", lambda req: (alibaba_api_handler if "Action" in req.query
                                              else tencent_handler)(req)),
    "autodl.machine_list": ("POST", "/api/v1/user/machine/list", autodl_list_handler),
    "autodl.gpu_stock": ("POST", "/api/v1/dev/machine/region/gpu_stock", autodl_stock_handler),
    "tencent.cvm": ("POST", "/", lambda req: (alibaba_api_handler if "Action" in req.query
                                              else tencent_handler)(req)),
    # The financial regions' own host (cvm.<region>.tencentcloudapi.com) answers the same way.
    "tencent.cvm_financial": ("POST", "/", lambda req: (alibaba_api_handler if "Action" in
                                                        req.query else tencent_handler)(req)),
    "huawei.iam": ("GET", "/v3/auth/projects", huawei_iam_handler),
    "huawei.iam_domains": ("GET", "/v3/auth/domains", huawei_domains_handler),
    "huawei.bss": ("POST", "/v2/bills/ratings/on-demand-resources", huawei_bss_handler),
    # The ECS endpoint is a template; the concrete per-project paths are routed below.
    "huawei.ecs": ("GET", "/v1/{project_id}/cloudservers/flavors", huawei_flavors_handler),
    **{f"huawei.flavors_{region}": ("GET", f"/v1/{pid}/cloudservers/flavors",
                                    huawei_flavors_handler)
       for pid, region in HUAWEI_PROJECTS.items()},
    "huawei.ecs_zones": ("GET", "/v2.1/{project_id}/os-availability-zone", huawei_zones_handler),
    **{f"huawei.zones_{region}": ("GET", f"/v2.1/{pid}/os-availability-zone",
                                  huawei_zones_handler)
       for pid, region in HUAWEI_PROJECTS.items()},
}
