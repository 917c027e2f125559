"""Routes for hyperbolic: the public on-demand rental options, as captured; and that
capture, for `python -m tests.make_recordings hyperbolic`."""

from tests.make_recordings import GPU_INDEX, Capture
from tests.provider_server import Reply, Request, fixture


def rental_options_handler(req: Request) -> Reply:
    return Reply(body=fixture("hyperbolic/rental_options_real.json"))


ROUTES = {
    "hyperbolic.rental_options": ("GET", "/v2/alpha/on-demand/rental-options",
                                  rental_options_handler),
}

CAPTURE = Capture(
    captured="2026-08-29",
    origin=[{"request": "GET https://api.hyperbolic.ai/v2/alpha/on-demand/rental-options",
             "repository": GPU_INDEX, "commit": "f78dffff2c169d009392ba355f5d5d7901e55826",
             "path": "tests/fixtures/observatory/hyperbolic/rental_options.json",
             "when": "2026-08-29 (the recorder's test module says so)"}],
    trimmed="All 13 options; the field providerCostPerHourCents removed from each (the "
            "recorder had replaced Hyperbolic's supplier cost by stand-ins, and gpuradar "
            "never reads it); everything else verbatim.",
    routes=ROUTES)
