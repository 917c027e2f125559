"""Routes for latitude: the plan data of its pricing page as captured
(tests/fixtures/latitude/SOURCE.md); the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("latitude/pricing_plans_real.html"),
                 content_type="text/html; charset=utf-8")


# Among every provider's routes on one server (serve_standard) the page has a path of its
# own; its capture answers at the real path, which its recording keys replay by.
ROUTES = {"latitude.pricing": ("GET", "/latitude/pricing", pricing_handler)}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://www.latitude.sh/pricing",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/latitude/pricing_excerpt.html",
             "when": "2026-08-22 (the live page gpu-index's collector describes)"}],
    trimmed="The embedded plansData only: its three GPU plans, each unchanged; the CPU plans "
            "cut whole, the list closed after the last plan kept.",
    routes={"latitude.pricing": ("GET", "/pricing", pricing_handler)})
