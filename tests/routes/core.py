"""Routes for azure, vastai and fx."""

from tests.provider_server import Reply, Request, fixture


def azure_handler(req: Request) -> Reply:
    """Retail Prices API: page 2 when $skip is given. NextPageLink points back here."""
    page = "prices_page2.json" if "$skip" in req.query else "prices_page1.json"
    body = fixture(f"azure/{page}").replace(b"https://prices.azure.com:443", b"{{BASE}}")
    return Reply(body=body)


def vastai_handler(req: Request) -> Reply:
    q = req.json() or {}
    name = (q.get("gpu_name") or {}).get("eq")
    files = {"H100 SXM": "bundles_h100_sxm_real.json", "RTX 4090": "bundles_rtx_4090.json",
             "A100 SXM4": "bundles_a100_sxm4.json", "RTX 5090": "bundles_rtx_5090.json",
             None: "bundles_any.json"}
    f = files.get(name)
    return Reply(body=fixture(f"vastai/{f}") if f else b'{"offers": []}')


def fx_handler(req: Request) -> Reply:
    return Reply(body=fixture("fx/eurofxref-daily.xml"), content_type="text/xml")


ROUTES = {
    "azure.prices": ("GET", "/api/retail/prices", azure_handler),
    "vastai.bundles": ("POST", "/api/v0/bundles/", vastai_handler),
    "fx.ecb": ("GET", "/stats/eurofxref/eurofxref-daily.xml", fx_handler),
}
