"""Routes for lium: the public node feed, answering with the real recorded book; and that
recording's capture, for `python -m tests.make_recordings lium`."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def nodes_handler(req: Request) -> Reply:
    return Reply(body=fixture("lium/nodes_real.json"))


ROUTES = {
    "lium.nodes": ("GET", "/api/public/v1/nodes", nodes_handler),
}

CAPTURE = Capture(
    captured="2026-09-10",
    origin=[{"request": "GET https://lium.io/api/public/v1/nodes",
             "repository": "https://github.com/dstackai/gpuhunt",
             "commit": "168f678a944647ed73850333a5f1f1fbd155fc35",
             "path": "src/tests/providers/test_lium.py (RECORDED_FEED)",
             "when": "2026-09-10 07:37 UTC (the feed's generated_at)"}],
    trimmed="Four nodes of the book, as the recorder trimmed it; every value verbatim.",
    routes=ROUTES)
