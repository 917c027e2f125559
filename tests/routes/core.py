"""Routes for azure, vastai and fx."""

import json
import re
from urllib.parse import parse_qs, urlencode

from gpuradar.core.providers.azure import REGIONS
from tests.provider_server import Reply, Request, fixture

AZURE_PAGE_SIZE = 5


def azure_region(req: Request) -> str | None:
    """The region an `armRegionName eq '...'` term of the request's `$filter` names."""
    found = re.search(r"armRegionName eq '([^']*)'", (req.query.get("$filter") or [""])[0])
    return found[1] if found else None


def azure_retail_prices(req: Request, items: list[dict],
                        page_size: int = AZURE_PAGE_SIZE) -> Reply:
    """The Retail Prices API as Microsoft documents it: the items of the region the `$filter`
    names (all of them without one), `page_size` a page, each page's `NextPageLink`
    the same query with `$skip` (null on the last), in the envelope of a real answer."""
    region = azure_region(req)
    mine = [i for i in items if region is None or i["armRegionName"] == region]
    skip = int((req.query.get("$skip") or ["0"])[0])
    page = mine[skip:skip + page_size]
    query = {k: v for k, v in req.query.items() if k != "$skip"}
    more = skip + page_size < len(mine)
    next_link = ("{{BASE}}/api/retail/prices?"
                 + urlencode({**query, "$skip": [skip + page_size]}, doseq=True)
                 if more else None)
    return Reply(body=json.dumps({"BillingCurrency": "USD", "CustomerEntityId": "Default",
                                  "CustomerEntityType": "Retail", "Items": page,
                                  "NextPageLink": next_link, "Count": len(page)}).encode())


#: The requests of one crawl of `azure_handler` with the default regions: a first page per
#: region, and eastus's 9 meters are 2 pages.
AZURE_STANDARD_REQUESTS = len(REGIONS) + 1


def azure_handler(req: Request) -> Reply:
    """Retail Prices API over the items of prices_page1.json and prices_page2.json."""
    items = [i for name in ("prices_page1.json", "prices_page2.json")
             for i in json.loads(fixture(f"azure/{name}"))["Items"]]
    return azure_retail_prices(req, items)


# The service principal the Azure routes accept, and the token they hand out (token_real.json
# with `access_token` changed).
AZURE_CREDENTIALS = {"tenant_id": "tenant-0001", "client_id": "client-0002",
                     "client_secret": "cs-secret-5a4b3c2d1e", "subscription_id": "sub-0003"}
AZURE_TOKEN = "eyJ0-test-access-token-9f8e7d"
AZURE_TOKEN_PATH = "/tenant-0001/oauth2/v2.0/token"
AZURE_SKUS_PATH = "/subscriptions/sub-0003/providers/Microsoft.Compute/skus"


def azure_token_handler(req: Request) -> Reply:
    """Entra ID's client-credentials grant: the token for the right form, else its 401."""
    form = {k: v[0] for k, v in parse_qs(req.body.decode()).items()}
    want = {"client_id": AZURE_CREDENTIALS["client_id"], "grant_type": "client_credentials",
            "client_secret": AZURE_CREDENTIALS["client_secret"],
            "scope": "https://management.azure.com/.default"}
    if form != want:
        return Reply(401, json.dumps({"error": "invalid_client"}).encode())
    token = json.loads(fixture("azure/token_real.json")) | {"access_token": AZURE_TOKEN}
    return Reply(body=json.dumps(token).encode())


def azure_skus_handler(req: Request) -> Reply:
    """The Resource SKUs list for the bearer token, else ARM's 401."""
    if req.headers.get("authorization") != f"Bearer {AZURE_TOKEN}" or \
            req.query.get("api-version") != ["2021-07-01"]:
        return Reply(401, b'{"error": {"code": "AuthenticationFailed", "message": "no"}}')
    return Reply(body=fixture("azure/resource_skus_southcentralus_real.json"))


AZURE_RESOURCE_GRAPH_PATH = "/providers/Microsoft.ResourceGraph/resources"


def azure_resource_graph_handler(req: Request) -> Reply:
    """Resource Graph: the eviction rates for the bearer token and a QueryRequest that asks
    the SpotResources table, else ARM's 401 / a 400 as ARM words a bad query."""
    if req.headers.get("authorization") != f"Bearer {AZURE_TOKEN}" or \
            req.query.get("api-version") != ["2021-03-01"]:
        return Reply(401, b'{"error": {"code": "AuthenticationFailed", "message": "no"}}')
    try:
        body = json.loads(req.body)
    except ValueError:
        body = None
    if not isinstance(body, dict) or "skuspotevictionrate" not in str(body.get("query")):
        return Reply(400, b'{"error": {"code": "BadRequest", "message": "query"}}')
    return Reply(body=fixture("azure/resource_graph_spot_eviction_rates.json"))


VASTAI_FILES = ("bundles_h100_sxm_real.json", "bundles_rtx_4090.json", "bundles_a100_sxm4.json",
                "bundles_rtx_5090.json", "bundles_any.json")


def vastai_offers() -> list[dict]:
    """Every offer of the Vast.ai fixtures, once."""
    offers: dict[int, dict] = {}
    for name in VASTAI_FILES:
        for offer in json.loads(fixture(f"vastai/{name}"))["offers"]:
            offers.setdefault(offer["id"], offer)
    return list(offers.values())


def _matches(value, condition: dict) -> bool:
    ops = {"eq": lambda a, b: a == b, "in": lambda a, b: a in b,
           "notin": lambda a, b: a not in b, "gt": lambda a, b: a > b,
           "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b}
    return all(ops[op](value, arg) for op, arg in condition.items())


def vastai_search(query: dict, offers: list[dict]) -> dict:
    """The bundles search as Vast documents it: field filters (eq/in/notin/gt/gte/lt/lte),
    `order`, and `limit` with `truncated` when the answer was cut short."""
    # `rented` is not a server-side filter (Vast's API reference): the server drops it.
    fields = {k: v for k, v in query.items() if isinstance(v, dict) and k != "rented"}
    found = [o for o in offers if all(_matches(o.get(f), c) for f, c in fields.items())]
    for field, direction in reversed(query.get("order") or []):
        found.sort(key=lambda o: o.get(field) or 0, reverse=direction == "desc")
    limit = int(query.get("limit") or 64)
    return {"offers": found[:limit], "truncated": len(found) > limit}


def vastai_handler(req: Request) -> Reply:
    return Reply(body=json.dumps(vastai_search(req.json() or {}, vastai_offers())).encode())


def fx_handler(req: Request) -> Reply:
    return Reply(body=fixture("fx/eurofxref-daily.xml"), content_type="text/xml")


ROUTES = {
    "azure.prices": ("GET", "/api/retail/prices", azure_handler),
    "azure.token": ("POST", AZURE_TOKEN_PATH, azure_token_handler),
    "azure.skus": ("GET", AZURE_SKUS_PATH, azure_skus_handler),
    "azure.resource_graph": ("POST", AZURE_RESOURCE_GRAPH_PATH, azure_resource_graph_handler),
    "vastai.bundles": ("POST", "/api/v0/bundles/", vastai_handler),
    "fx.ecb": ("GET", "/stats/eurofxref/eurofxref-daily.xml", fx_handler),
}
