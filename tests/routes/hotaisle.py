"""Routes for hotaisle: the public pricing page, as captured (its plan cards)."""

from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("hotaisle/pricing_cards_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {
    "hotaisle.pricing": ("GET", "/hotaisle/pricing", pricing_handler),
}
