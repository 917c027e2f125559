"""Routes for crusoe: the public pricing page, as captured (its GPU section)."""

from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("crusoe/pricing_gpu_section_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {
    "crusoe.pricing": ("GET", "/cloud/pricing", pricing_handler),
}
