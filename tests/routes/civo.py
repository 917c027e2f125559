"""Routes for civo: GPU tables of its pricing page as captured
(tests/fixtures/civo/SOURCE.md); the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("civo/pricing_gpus_real.html"),
                 content_type="text/html; charset=utf-8")


# Among every provider's routes on one server (serve_standard) the page has a path of its
# own; its capture answers at the real path, which its recording keys replay by.
ROUTES = {"civo.pricing": ("GET", "/civo/pricing", pricing_handler)}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://www.civo.com/pricing",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/civo/pricing_excerpt.html",
             "when": "2026-08-22 (the live page gpu-index's fixture pins describe)"}],
    trimmed="Four GPU sections whole (A100 40GB, H100 SXM, H200 SXM, B200) with their "
            "separators; the L40S and A100 80GB sections and every non-GPU table cut whole, "
            "nothing edited.",
    routes={"civo.pricing": ("GET", "/pricing", pricing_handler)})
