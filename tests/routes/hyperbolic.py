"""Routes for hyperbolic: the public on-demand rental options, as captured."""

from tests.provider_server import Reply, Request, fixture


def rental_options_handler(req: Request) -> Reply:
    return Reply(body=fixture("hyperbolic/rental_options_real.json"))


ROUTES = {
    "hyperbolic.rental_options": ("GET", "/v2/alpha/on-demand/rental-options",
                                  rental_options_handler),
}
