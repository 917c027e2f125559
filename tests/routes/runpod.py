"""Routes for runpod: the GraphQL endpoint, answering the per-GPU-count stock queries."""

import re

from tests.provider_server import Reply, Request, fixture


def graphql_handler(req: Request) -> Reply:
    """One answer per GPU count (tests/fixtures/runpod/stock_<N>.json); the count is read
    from the query's `lowestPrice(input: {gpuCount: N ...})`."""
    query = (req.json() or {}).get("query", "")
    counts = set(re.findall(r"gpuCount:\s*(\d+)", query))
    if len(counts) != 1 or not 1 <= int(next(iter(counts))) <= 8:
        return Reply(400, b'{"errors": [{"message": "unexpected query in the fixture server"}]}')
    return Reply(body=fixture(f"runpod/stock_{counts.pop()}.json"))


ROUTES = {
    "runpod.graphql": ("POST", "/graphql", graphql_handler),
}
