"""Routes for voltagepark: the dashboard's public bare-metal locations, as captured; and that
capture, for `python -m tests.make_recordings voltagepark`."""

from tests.make_recordings import GPU_INDEX, Capture
from tests.provider_server import Reply, Request, fixture


def locations_handler(req: Request) -> Reply:
    return Reply(body=fixture("voltagepark/locations_real.json"))


ROUTES = {
    "voltagepark.locations": ("GET", "/api/v1/bare-metal/locations", locations_handler),
}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://cloud-api.voltagepark.com/api/v1/bare-metal/locations",
             "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/voltagepark/locations.json",
             "when": "2026-08-22 (the recorder's test module says so)"}],
    trimmed="The whole answer, verbatim.",
    routes=ROUTES)
