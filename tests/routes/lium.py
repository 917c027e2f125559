"""Routes for lium: the public node feed, answering with the real recorded book."""

from tests.provider_server import Reply, Request, fixture


def nodes_handler(req: Request) -> Reply:
    return Reply(body=fixture("lium/nodes_real.json"))


ROUTES = {
    "lium.nodes": ("GET", "/api/public/v1/nodes", nodes_handler),
}
