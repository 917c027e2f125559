"""Routes for gcp: the Cloud Billing Catalog SKU lists from fixtures -- Compute Engine in two
pages, Cloud TPU in one."""

from tests.provider_server import Reply, Request, fixture


def skus_handler(req: Request) -> Reply:
    if "key" in req.query:  # the spider sends the key as a header, never in the URL
        return Reply(400, b'{"error": {"code": 400, "message": "key in URL"}}')
    page = "skus_page2.json" if req.query.get("pageToken") else "skus_page1.json"
    return Reply(body=fixture(f"gcp/{page}"))


def tpu_skus_handler(req: Request) -> Reply:
    if "key" in req.query:
        return Reply(400, b'{"error": {"code": 400, "message": "key in URL"}}')
    return Reply(body=fixture("gcp/skus_tpu_service.json"))


ROUTES = {
    "gcp.skus": ("GET", "/v1/services/6F81-5844-456A/skus", skus_handler),
    "gcp.tpu_skus": ("GET", "/v1/services/E000-3F24-B8AA/skus", tpu_skus_handler),
}
