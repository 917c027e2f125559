"""Routes for together: the public pricing page, as captured (its GPU Clusters section); and
that capture, for `python -m tests.make_recordings together`."""

from tests.make_recordings import GPU_INDEX, Capture
from tests.provider_server import Reply, Request, fixture


def pricing_handler(req: Request) -> Reply:
    return Reply(body=fixture("together/pricing_gpu_clusters_real.html"),
                 content_type="text/html; charset=utf-8")


ROUTES = {
    # Lambda's page is /pricing on the shared test server too: this one lives beside it.
    "together.pricing": ("GET", "/together/pricing", pricing_handler),
}

CAPTURE = Capture(
    captured="2026-08-22",
    origin=[{"request": "GET https://www.together.ai/pricing",
             "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
             "path": "tests/fixtures/observatory/together/pricing.html",
             "when": "2026-08-22 (the recorder's collector: 'verified live 2026-08-22')"}],
    trimmed="The GPU Clusters section of the recorder's excerpt, with whole elements cut: the "
            "Dedicated Inference section before it, the accordion icon, the hidden duplicate "
            "table and the next section's anchor; nothing edited.",
    # recorded at the page's own path, which a replay of https://www.together.ai/pricing asks
    routes={"together.pricing": ("GET", "/pricing", pricing_handler)})
