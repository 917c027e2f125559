"""Regenerate the recordings shipped for `gpuradar demo` (gpuradar/recordings/) from real
public captures only, by crawling a loopback server that answers with them
(`gpuradar crawl --record`). Each recording gets a `provenance.json` beside it: where every
captured response came from, when it was captured, and what was trimmed.

A source with no real public capture of what gpuradar requests gets no recording: the demo
says so instead of showing invented offers.

    python -m tests.make_recordings
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.provider_server import ProviderServer, Reply, Request, fixture

RECORDINGS = Path(__file__).parent.parent / "gpuradar" / "recordings"
NOT_CAPTURED = "no public capture of this request; answered with an empty list"


@dataclass
class Capture:
    """The real responses of one source, and what the demo says about them."""

    captured: str                       # ISO date (or month) the provider served them
    origin: list[dict[str, str]]        # one entry per captured response
    routes: dict[str, tuple[str, str, Any]]
    trimmed: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    # endpoint name -> path on the loopback server, where it is not a route's own path
    # (an endpoint with a placeholder, such as AWS's on-demand file per location)
    endpoints: dict[str, str] = field(default_factory=dict)
    # recording key ("GET /path") -> capture date of an answer older or newer than the rest
    dated: dict[str, str] = field(default_factory=dict)


def _json_reply(data: Any) -> Reply:
    return Reply(body=json.dumps(data, indent=1, ensure_ascii=False).encode())


# -- Vast.ai: one real search (gpu_name "H100 SXM", cheapest first) -------------------------
def _vastai(req: Request) -> Reply:
    """The spider searches all known models at once (`gpu_name` `in` [...]) and the rest
    (`notin`): the one real capture answers for its model when the search includes it."""
    name = (req.json() or {}).get("gpu_name") or {}
    if "H100 SXM" in (name.get("in") or []) or name.get("eq") == "H100 SXM":
        return Reply(body=fixture("vastai/bundles_h100_sxm_real.json"))
    return Reply(body=b'{"offers": []}')


# -- OCI: the real price list of 2026-08-14 and the shapes whose prices it holds ------------
# Shape records with the estimator's real values (as recorded in gpuhunt's tests, see
# tests/fixtures/oci/SOURCE.md) whose GPU part number is in the real price-list excerpt.
OCI_SHAPES = ("BM.GPU.H100.8", "BM.GPU.A100-v2.8", "BM.GPU.MI300X.8", "BM.GPU.MI355X.8",
              "BM.GPU.RTXPRO.8")


def _oci_shapes(req: Request) -> Reply:
    data = json.loads(fixture("oci/shapes.json"))
    return _json_reply({**data, "items": [s for s in data["items"] if s["name"] in OCI_SHAPES]})


def _oci_prices(req: Request) -> Reply:
    return Reply(body=fixture("oci/products_usd_real_excerpt.json"))


# -- GCP: one real page of the SKU list -----------------------------------------------------
def _gcp(req: Request) -> Reply:
    data = json.loads(fixture("gcp/skus_real_opencost.json"))
    return _json_reply({**data, "nextPageToken": ""})


def _gcp_tpu(req: Request) -> Reply:
    """The Cloud TPU service (TPU v2-v4): no public capture; an empty page."""
    return Reply(body=EMPTY_SKUS)


EMPTY_SKUS = b'{"skus": [], "nextPageToken": ""}'


def _lambda(req: Request) -> Reply:
    """The excerpt lacks the 4x and 2x panels: their tab buttons go too (whole elements)."""
    page = fixture("lambda/pricing_excerpt_real.html").decode()
    for n in (1, 2):
        page = re.sub(rf'<button role="tab"[^>]*tabpanel-[^"]*-{n}"[^>]*>.*?</button>', "",
                      page, flags=re.S)
    return Reply(body=page.encode(), content_type="text/html; charset=utf-8")


# -- RunPod: the real answer of the plain `gpuTypes` query ----------------------------------
def _runpod(req: Request) -> Reply:
    """The spider asks for every GPU type with the stock of a 1-GPU pod; the one real capture
    answers the plain `gpuTypes` catalog query, which the spider reads as 1-GPU prices of both
    clouds with availability unknown (and no larger pods: the capture has no maxGpuCount)."""
    return Reply(body=fixture("runpod/gputypes_real.json"))


# -- Azure: twelve real Retail Prices rows of westus, 2026-08 ------------------------------
def _azure(req: Request) -> Reply:
    """The spider walks each region on its own chain: westus's request gets the captured
    rows (one page, as the API serves up to 1,000 items a page), every other region's an empty
    page (no public capture of it; marked so in the index)."""
    from tests.routes.core import azure_retail_prices

    rows = json.loads(fixture("azure/westus_real_rows.json"))["Items"]
    return azure_retail_prices(req, rows, page_size=1000)


# -- AWS: the real public feeds --------------------------------------------------------------
AWS_ONDEMAND = ("/pricing/2.0/meteredUnitMaps/ec2/USD/current/ec2-ondemand-without-sec-sel/"
                "{location}/Linux/index.json")
US_EAST_1 = AWS_ONDEMAND.format(location="US%20East%20%28N.%20Virginia%29")


def _aws_advisor(req: Request) -> Reply:
    """The Spot Advisor feed as alexei-led/spotinfo embeds it (2025-06-28), trimmed to the
    accelerator types: older than the rest of the capture, so dated on its own."""
    return Reply(body=fixture("aws/spot_advisor_real_accelerators.json"))


def _aws_locations(req: Request) -> Reply:
    return Reply(body=fixture("aws/locations.json"))


def _aws_spot(req: Request) -> Reply:
    return Reply(body=fixture("aws/spot_real_us-east-1.json"))


def _aws_ondemand(req: Request) -> Reply:
    return Reply(body=fixture("aws/ondemand_real_us-east-1.json"))


GPU_INDEX = "https://github.com/getcomputable/gpu-index"
CLOUD_PRICING = "https://github.com/ybastide/cloud-pricing"
SPOTINFO = "https://github.com/alexei-led/spotinfo"
ADVISOR_DATE = "2025-06-28"
CAPTURES: dict[str, Capture] = {
    "vastai": Capture(
        captured="2026-08-22",
        origin=[{"request": "POST https://console.vast.ai/api/v0/bundles/ (gpu_name H100 SXM, "
                            "cheapest first)",
                 "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
                 "path": "tests/fixtures/observatory/vast/h100_sxm_asc.json",
                 "when": "2026-08-22 18:14 UTC (end_date - duration of every offer)"}],
        trimmed="2 of the captured offers, copied verbatim. gpuradar searches every known "
                "model at once and then every other model; only the H100 SXM answer was "
                "captured, so the first search replays with those offers alone and the second "
                "as an empty answer: the demo shows Vast.ai's H100 SXM offers only.",
        routes={"vastai.bundles": ("POST", "/api/v0/bundles/", _vastai)}),
    "lambda": Capture(
        captured="2026-08",
        origin=[{"request": "GET https://lambda.ai/pricing",
                 "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
                 "path": "tests/fixtures/observatory/lambda/pricing.html",
                 "when": "2026-08, exact day not recorded (published with the 2026-08-22 "
                         "Vast.ai capture)"}],
        trimmed="Only the on-demand instances section: the 8x panel whole and part of the 1x "
                "panel, and the tab buttons of those two; whole elements were cut, nothing "
                "edited.",
        routes={"lambda.pricing": ("GET", "/pricing", _lambda)}),
    "oci": Capture(
        captured="2026-08-14",
        origin=[{"request": "GET https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/"
                            "?currencyCode=USD",
                 "repository": GPU_INDEX, "commit": "38e515c00ad4c186cddb1ca004f18168cfd0d223",
                 "path": "tests/fixtures/observatory/oracle/products_usd.json",
                 "when": "2026-08-14 (the list's lastUpdated)"},
                {"request": "GET https://www.oracle.com/a/ocom/docs/cloudestimator2/data/"
                            "shapes.json",
                 "repository": "https://github.com/dstackai/gpuhunt",
                 "commit": "35841515de3792fe6be73b0422ac8901b6b929c8",
                 "path": "src/tests/providers/test_oci.py (shape records)",
                 "when": "2026-09-18 (estimator values recorded in those tests)"}],
        trimmed="14 price-list items verbatim; the 5 GPU shapes whose price is in them.",
        routes={"oci.shapes": ("GET", "/a/ocom/docs/cloudestimator2/data/shapes.json",
                               _oci_shapes),
                "oci.prices": ("GET", "/pls/apex/cetools/api/v1/products/", _oci_prices)}),
    "gcp": Capture(
        captured="2023-03-24",
        origin=[{"request": "GET https://cloudbilling.googleapis.com/v1/services/"
                            "6F81-5844-456A/skus",
                 "repository": "https://github.com/opencost/opencost",
                 "commit": "5f6533303e3850c8635796a74bb22802d16e9090",
                 "path": "pkg/cloud/gcp/test/skus.json",
                 "when": "on or after 2023-03-24 (the SKUs' effectiveTime)"}],
        trimmed="One page of 7 SKUs verbatim (A100 GPU, A2 core and RAM in the Americas); its "
                "nextPageToken emptied so the crawl ends there. The Cloud TPU service (TPU v2-v4) "
                "has no public capture: it replays as an empty page.",
        options={"api_key": "recording-placeholder"},
        routes={"gcp.skus": ("GET", "/v1/services/6F81-5844-456A/skus", _gcp),
                "gcp.tpu_skus": ("GET", "/v1/services/E000-3F24-B8AA/skus", _gcp_tpu)}),
    "runpod": Capture(
        captured="2026-08",
        origin=[{"request": "POST https://api.runpod.io/graphql query { gpuTypes { id "
                            "displayName memoryInGb securePrice communityPrice secureSpotPrice "
                            "communitySpotPrice } }",
                 "repository": GPU_INDEX, "commit": "055204adf5e64e62595f97c49b7eb65400149871",
                 "path": "tests/fixtures/observatory/runpod/gputypes.json",
                 "when": "2026-08, exact day not recorded (published with the 2026-08-22 "
                         "Vast.ai capture)"}],
        trimmed="The whole answer, verbatim. gpuradar asks for every GPU type with the stock of "
                "a 1-GPU pod in each cloud; only the plain gpuTypes query was captured, so it "
                "answers that request: 1-GPU prices of the secure and community clouds, "
                "availability unknown, no larger pods.",
        routes={"runpod.graphql": ("POST", "/graphql", _runpod)}),
    "azure": Capture(
        captured="2026-08",
        origin=[{"request": "GET https://prices.azure.com/api/retail/prices (westus)",
                 "repository": "https://github.com/jokamotonpi/azure-price-mirror",
                 "commit": "2129dd59f2ca435dc0d35ccbad80b31e06e728f9",
                 "path": "prices/AzurePriceList_westus.csv",
                 "when": "2026-08, exact day not recorded"}],
        trimmed="12 GPU rows of the westus capture (tests/fixtures/azure/README.md says how "
                "the CSV rows became API items); one page, the answer to the westus request "
                "(the spider asks each region on its own chain since 2026-12-06; the same "
                "rows as before). Of them only the Linux pay-as-you-go "
                "Standard_ND96is_noIB_H100_v5 is an offer gpuradar stores: the others are "
                "Windows, DevTest or Reservation meters. Every other region was not captured "
                "and answers an empty page.",
        routes={"azure.prices": ("GET", "/api/retail/prices", _azure)}),
    "aws": Capture(
        captured="2026-08-09",
        origin=[{"request": "GET https://spot-bid-advisor.s3.amazonaws.com/"
                            "spot-advisor-data.json",
                 "repository": SPOTINFO, "commit": "5eedf20a99614443af215f4aaf09bd10805cac72",
                 "path": "internal/spot/data/spot-advisor-data.json",
                 "when": f"on or before {ADVISOR_DATE} (committed 2025-06-28T13:10:57+03:00; "
                         "the tool embeds the feed verbatim)"},
                {"request": "GET https://website.spot.ec2.aws.a2z.com/spot.json",
                 "repository": CLOUD_PRICING, "commit": "576ca4f2495cf9bbc0fb7a119b098b07c23860a5",
                 "path": "fixtures/aws/spot.json",
                 "when": "on or before 2026-08-09 (committed then)"},
                {"request": "GET https://b0.p.awsstatic.com/pricing/2.0/meteredUnitMaps/ec2/"
                            "USD/current/ec2-ondemand-without-sec-sel/US%20East%20%28N.%20"
                            "Virginia%29/Linux/index.json",
                 "repository": CLOUD_PRICING, "commit": "e6812fdf84174a8807b5ea2e06068c9460ba848b",
                 "path": "fixtures/aws/index.json",
                 "when": "published 2026-08-06 17:17 UTC (manifest.hawkFilePublicationDate), "
                         "fetched on or before 2026-08-09"},
                {"request": "GET https://b0.p.awsstatic.com/locations/1.0/aws/current/"
                            "locations.json",
                 "repository": CLOUD_PRICING, "commit": "e6812fdf84174a8807b5ea2e06068c9460ba848b",
                 "path": "fixtures/aws/locations.json", "when": "on or before 2026-08-09"}],
        trimmed="The spot feed: region us-east-1 only, its gpuCurrentGen group verbatim (the "
                "spider then reads the on-demand file of that region alone). The on-demand "
                "file: every accelerator entry verbatim, most CPU entries left out (see "
                "tests/fixtures/aws/SOURCE.md). The Spot Advisor feed: its Linux advice and "
                "instance_types entries of the accelerator types gpuradar knows (73 types, "
                "822 region-type bands in 33 regions), ranges and global_rate, values "
                "verbatim; every CPU type and the Windows advice left out. It is older than "
                "the rest (2025-06-28): its index entry carries that date, and so does every "
                "band replayed from it.",
        dated={"GET /spot-advisor-data.json": ADVISOR_DATE},
        routes={"aws.advisor": ("GET", "/spot-advisor-data.json", _aws_advisor),
                "aws.locations": ("GET", "/locations/1.0/aws/current/locations.json",
                                  _aws_locations),
                "aws.spot": ("GET", "/spot.json", _aws_spot),
                "route:aws.ondemand.us-east-1": ("GET", US_EAST_1, _aws_ondemand),
                "route:aws.ondemand.us-east-1.plain": (
                    "GET", AWS_ONDEMAND.format(location="US%20East%20(N.%20Virginia)"),
                    _aws_ondemand)},
        endpoints={"aws.ondemand": AWS_ONDEMAND}),
}


def serve_capture(server: ProviderServer, capture: Capture) -> dict[str, str]:
    """Serve a capture's routes; the endpoint overrides that point at them."""
    endpoints = {}
    for key, (method, path, handler) in capture.routes.items():
        server.route(method, path, handler)
        if not key.startswith("route:"):  # not an endpoint: one more path served
            endpoints[key] = server.base + path
    endpoints.update({key: server.base + path for key, path in capture.endpoints.items()})
    return endpoints


def captures() -> dict[str, Capture]:
    """The captures above and the `CAPTURE` of each provider's module in tests/routes/ (a
    new provider keeps its capture beside its routes: no list here to edit)."""
    import importlib
    import pkgutil

    import tests.routes as pkg

    found = dict(CAPTURES)
    for mod in pkgutil.iter_modules(pkg.__path__):
        capture = getattr(importlib.import_module(f"tests.routes.{mod.name}"), "CAPTURE", None)
        if capture is not None:
            found[mod.name.rstrip("_")] = capture
    return found


def main(sources: list[str]) -> int:
    known = captures()
    names = sources or sorted(known)
    with ProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        endpoints = {}
        for name in names:
            endpoints.update(serve_capture(server, known[name]))
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump({"endpoints": endpoints, "scrapy": {"DOWNLOAD_DELAY": 0},
                                       "sources": {s: {"enabled": True, **known[s].options}
                                                   for s in names}}))
        out = Path(tmp) / "rec"
        env = dict(os.environ, GPURADAR_DATABASE_URL=f"sqlite:///{tmp}/rec.db",
                   GPURADAR_DATA_DIR=tmp)  # a page source's HTTP cache: not the user's
        proc = subprocess.run([sys.executable, "-m", "gpuradar", "crawl", "--config",
                               str(cfg), "--record", str(out), *names], env=env)
        if not sources:  # a full rebuild: nothing invented may stay behind
            for old in RECORDINGS.iterdir():
                if old.is_dir() and old.name not in known:
                    shutil.rmtree(old)
        for name in names:
            shutil.rmtree(RECORDINGS / name, ignore_errors=True)
            shutil.copytree(out / name, RECORDINGS / name)
            _annotate(RECORDINGS / name, known[name])
            print(f"recorded {name}")
        return proc.returncode


def _empty_azure_page(body: str) -> bool:
    """An Azure Retail Prices page without items: a region no capture holds."""
    try:
        page = json.loads(body)
    except ValueError:
        return False
    return isinstance(page, dict) and page.get("Items") == [] and "BillingCurrency" in page


def _annotate(folder: Path, capture: Capture) -> None:
    """Mark stand-in answers in the index and write the provenance file. The loopback
    server's own robots.txt answer (a page source asks for it first) is no capture: it is
    left out, and a replay never asks for it."""
    index = json.loads((folder / "index.json").read_text())
    for entry in [e for e in index if e["key"] == "GET /robots.txt"]:
        (folder / entry["file"]).unlink()
        index.remove(entry)
    for entry in index:
        body = (folder / entry["file"]).read_text()
        if body in ('{"offers": []}', EMPTY_SKUS.decode()) or _empty_azure_page(body):
            entry["note"] = NOT_CAPTURED
        if entry["key"] in capture.dated:
            entry["captured"] = capture.dated[entry["key"]]
    (folder / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False))
    (folder / "provenance.json").write_text(json.dumps(
        {"captured": capture.captured, "origin": capture.origin, "trimmed": capture.trimmed},
        indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
