"""Routes for crusoe: the public pricing page, as captured (its GPU section); and that
capture, for `python -m tests.make_recordings crusoe`."""

from tests.make_recordings import GPU_INDEX, Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("crusoe/pricing_gpu_section_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {
    "crusoe.pricing": ("GET", "/cloud/pricing", pricing_handler),
}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://www.crusoe.ai/cloud/pricing",
             "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/crusoe/pricing.html",
             "when": "2026-08-22 (the recorder's collector: 'verified live 2026-08-22')"}],
    trimmed="The GPU instances section only (the capture's first element), each row's arrow "
            "icon cut as a whole element; nothing edited.",
    routes=ROUTES)
