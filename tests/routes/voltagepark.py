"""Routes for voltagepark: the dashboard's public bare-metal locations, as captured."""

from tests.provider_server import Reply, Request, fixture


def locations_handler(req: Request) -> Reply:
    return Reply(body=fixture("voltagepark/locations_real.json"))


ROUTES = {
    "voltagepark.locations": ("GET", "/api/v1/bare-metal/locations", locations_handler),
}
