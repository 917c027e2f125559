"""Routes for coreweave: its pricing page's on-demand tables as captured
(tests/fixtures/coreweave/SOURCE.md); the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("coreweave/pricing_excerpt.html"),
                 content_type="text/html; charset=utf-8")


# Among every provider's routes on one server (serve_standard) the page has a path of its
# own; its capture answers at the real path, which its recording keys replay by.
ROUTES = {"coreweave.pricing": ("GET", "/coreweave/pricing", pricing_handler)}

CAPTURE = Capture(
    captured="2026-08",
    origin=[{"request": "GET https://www.coreweave.com/pricing",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/coreweave/pricing.html",
             "when": "2026-08, exact day not recorded (the gpu-index commit that holds it "
                     "keeps its other observatory captures of 2026-08)"}],
    trimmed="The on-demand section's North America table with 4 of its 10 rows (GB300 NVL72, "
            "HGX B200, HGX H100, GH200) and the Europe table with 1 of its 10 rows (HGX H100), "
            "each row byte for byte; the other rows and the tables' scripts cut, closing tags "
            "added.",
    routes={"coreweave.pricing": ("GET", "/pricing", pricing_handler)})
