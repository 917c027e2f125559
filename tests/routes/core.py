"""Routes for azure, vastai and fx."""

import json

from tests.provider_server import Reply, Request, fixture


def azure_handler(req: Request) -> Reply:
    """Retail Prices API: page 2 when $skip is given. NextPageLink points back here."""
    page = "prices_page2.json" if "$skip" in req.query else "prices_page1.json"
    body = fixture(f"azure/{page}").replace(b"https://prices.azure.com:443", b"{{BASE}}")
    return Reply(body=body)


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
    "vastai.bundles": ("POST", "/api/v0/bundles/", vastai_handler),
    "fx.ecb": ("GET", "/stats/eurofxref/eurofxref-daily.xml", fx_handler),
}
