"""Routes for scaleway: the Instance API's server catalog and stock in fr-par-2, as captured
(tests/fixtures/scaleway/SOURCE.md); the capture the demo's recording is made from."""

from tests.make_recordings import Capture
from tests.provider_server import Reply, Request, fixture

SERVERS = "/instance/v1/zones/{zone}/products/servers"
AVAILABILITY = SERVERS + "/availability"


def servers_handler(req: Request) -> Reply:
    return Reply(body=fixture("scaleway/servers_fr-par-2_real.json"))


def availability_handler(req: Request) -> Reply:
    return Reply(body=fixture("scaleway/availability_fr-par-2_real.json"))


ROUTES = {
    "route:scaleway.servers.fr-par-2": ("GET", SERVERS.format(zone="fr-par-2"), servers_handler),
    "route:scaleway.availability.fr-par-2": ("GET", AVAILABILITY.format(zone="fr-par-2"),
                                             availability_handler),
}

GPU_INDEX = "https://github.com/getcomputable/gpu-index"
CAPTURE = Capture(
    captured="2026-08",
    origin=[{"request": "GET https://api.scaleway.com/instance/v1/zones/fr-par-2/products/"
                        "servers?per_page=100&page=1",
             "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/scaleway/servers_page1.json",
             "when": "2026-08, exact day not recorded (gpu-index verified this surface live "
                     "on 2026-08-22)"},
            {"request": "GET https://api.scaleway.com/instance/v1/zones/fr-par-2/products/"
                        "servers/availability?per_page=100",
             "repository": GPU_INDEX, "commit": "38e515c00ad4c186cddb1ca004f18168cfd0d223",
             "path": "tests/fixtures/observatory/scaleway/availability_page1.json",
             "when": "2026-08, exact day not recorded"}],
    trimmed="The catalog: 8 of its GPU server types and 1 CPU type, every value unchanged "
            "(re-indented); the stock answer: those 8 GPU types' entries. One zone, fr-par-2.",
    routes=ROUTES,
    endpoints={"scaleway.servers": SERVERS, "scaleway.availability": AVAILABILITY})
