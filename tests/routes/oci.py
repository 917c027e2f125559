"""Routes for oci: the cost estimator's shapes.json and the price list."""

from tests.provider_server import Reply, Request, fixture


def shapes_handler(req: Request) -> Reply:
    return Reply(body=fixture("oci/shapes.json"))


def prices_handler(req: Request) -> Reply:
    """The price list answers in the currency asked for; the fixture is the USD list."""
    if req.query.get("currencyCode", ["USD"]) != ["USD"]:
        return Reply(body=b'{"lastUpdated": "2026-08-14T09:09:55.872Z", "items": []}')
    return Reply(body=fixture("oci/products_usd.json"))


ROUTES = {
    "oci.shapes": ("GET", "/a/ocom/docs/cloudestimator2/data/shapes.json", shapes_handler),
    "oci.prices": ("GET", "/pls/apex/cetools/api/v1/products/", prices_handler),
}
