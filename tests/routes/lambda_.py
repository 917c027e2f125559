"""Routes for lambda: the Cloud API (instance types) and the public pricing page."""

from tests.provider_server import Reply, Request, fixture


def instance_types_handler(req: Request) -> Reply:
    return Reply(body=fixture("lambda/instance_types.json"))


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("lambda/pricing.html"), content_type="text/html; charset=utf-8")


ROUTES = {
    "lambda.instance_types": ("GET", "/api/v1/instance-types", instance_types_handler),
    "lambda.pricing": ("GET", "/pricing", pricing_handler),
}
