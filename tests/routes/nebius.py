"""Routes for nebius: its price page as captured (tests/fixtures/nebius/SOURCE.md); the
capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def prices_handler(req: Request) -> Reply:
    return Reply(body=fixture("nebius/prices_real.html"), content_type="text/html; charset=utf-8")


ROUTES = {"nebius.prices": ("GET", "/prices", prices_handler)}

CAPTURE = Capture(
    captured="2026-08",
    origin=[{"request": "GET https://nebius.com/prices",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/nebius/prices.html",
             "when": "2026-08, exact day not recorded (gpu-index verified the live page on "
                     "2026-08-22)"}],
    trimmed="The capture as published: the page's escaped JSON of its price tables only, "
            "byte for byte.",
    routes=ROUTES)
