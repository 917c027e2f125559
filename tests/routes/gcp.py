"""Routes for gcp: the Cloud Billing Catalog SKU list, two pages from fixtures."""

from tests.provider_server import Reply, Request, fixture


def skus_handler(req: Request) -> Reply:
    if "key" in req.query:  # the spider sends the key as a header, never in the URL
        return Reply(400, b'{"error": {"code": 400, "message": "key in URL"}}')
    page = "skus_page2.json" if req.query.get("pageToken") else "skus_page1.json"
    return Reply(body=fixture(f"gcp/{page}"))


ROUTES = {
    "gcp.skus": ("GET", "/v1/services/6F81-5844-456A/skus", skus_handler),
}
