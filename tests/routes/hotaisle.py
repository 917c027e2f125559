"""Routes for hotaisle: the public pricing page, as captured (its plan cards); and that
capture, for `python -m tests.make_recordings hotaisle`."""

from tests.make_recordings import GPU_INDEX, Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("hotaisle/pricing_cards_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {
    # Lambda's page is /pricing on the shared test server too: this one lives beside it.
    "hotaisle.pricing": ("GET", "/hotaisle/pricing", pricing_handler),
}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://hotaisle.xyz/pricing",
             "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/hotaisle/pricing_excerpt.html",
             "when": "2026-08-22 (the recorder's collector: 'shape verified live 2026-08-22')"}],
    trimmed="The recorder's excerpt, with whole elements cut: the head after the canonical "
            "link, the navigation link, each plan card's feature list and the footer list; "
            "nothing edited.",
    # recorded at the page's own path, which a replay of https://hotaisle.xyz/pricing asks for
    routes={"hotaisle.pricing": ("GET", "/pricing", pricing_handler)})
