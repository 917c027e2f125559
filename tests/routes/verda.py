"""Routes for verda: its pricing page's JSON-LD as captured (tests/fixtures/verda/SOURCE.md);
the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("verda/pricing_jsonld_real.html"),
                 content_type="text/html; charset=utf-8")


# Among every provider's routes on one server (serve_standard) the page has a path of its
# own; its capture answers at the real path, which its recording keys replay by.
ROUTES = {"verda.pricing": ("GET", "/verda/pricing", pricing_handler)}

CAPTURE = Capture(
    captured="2026-08",
    origin=[{"request": "GET https://verda.com/pricing",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/verda/pricing_jsonld.html",
             "when": "2026-08, exact day not recorded (gpu-index verified the live page on "
                     "2026-08-22)"}],
    trimmed="The JSON-LD element only, and of its @graph the Offer nodes offer-1 to offer-34 "
            "(the 1x instance prices, on-demand and spot) and offer-51, offer-52 (two GB300 "
            "instant clusters); every other node cut whole, none edited.",
    routes={"verda.pricing": ("GET", "/pricing", pricing_handler)})
