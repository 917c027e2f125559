"""Routes for digitalocean: the GPU sections of its docs pricing page as captured
(tests/fixtures/digitalocean/SOURCE.md); the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture

PATH = "/products/droplets/details/pricing/"


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("digitalocean/droplet_pricing_gpu_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {"digitalocean.pricing": ("GET", PATH, pricing_handler)}

CAPTURE = Capture(
    captured="2026-08-18",
    origin=[{"request": "GET https://docs.digitalocean.com/products/droplets/details/pricing/",
             "repository": "https://github.com/getcomputable/gpu-index",
             "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/digitalocean/droplets_pricing.html",
             "when": "on or after 2026-08-18 (the page's dateModified and 'Last verified 18 "
                     "Aug 2026')"}],
    trimmed="The GPU sections only: from <h2 id=\"on-demand-gpu-droplet-pricing\"> to the end "
            "of the contract table (on-demand, spot and contract sections with their billing "
            "notes), one contiguous slice, byte for byte.",
    routes=ROUTES)
