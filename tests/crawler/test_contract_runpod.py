"""Contract: every GraphQL field the RunPod spider asks for and reads exists in RunPod's
official Python SDK (`runpod`, the `contract` extra), or, where the SDK does not ask for it,
in a real RunPod answer or a named public client.

The SDK defines RunPod's GraphQL fields only as query text (runpod/api/queries/gpus.py), so
the test reads that file; it does not import the SDK (its package import starts a whole
serverless worker stack), and the product never does."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from gpuradar.crawler.spiders.runpod import (
    _AVAILABILITY_FIELDS,
    _DC_FIELDS,
    _STOCK_FIELDS,
    _TYPE_FIELDS,
    stock_query,
)
from tests.helpers import FIXTURES

FIX = FIXTURES / "runpod"

# Fields the spider asks for that the SDK's queries do not: where each one is documented.
# A real answer in tests/fixtures counts as proof by itself (checked below).
BEYOND_SDK = {
    "maxGpuCountSecureCloud": "gpuhunt's RunPod catalog query (dstackai/gpuhunt "
                              "src/gpuhunt/providers/runpod.py @ 35841515)",
    "maxGpuCountCommunityCloud": "gpuhunt's RunPod catalog query (same file)",
    "stockStatus": "real answer tests/fixtures/runpod/gputypes_datacenters_real.json",
    "maxUnreservedGpuCount": "SkyPilot's RunPod catalog fetcher (lowestPrice fields)",
    "availableGpuCounts": "SkyPilot's RunPod catalog fetcher (lowestPrice fields)",
    "minVcpu": "SkyPilot's RunPod catalog fetcher (lowestPrice fields)",
    "minMemory": "SkyPilot's RunPod catalog fetcher (lowestPrice fields)",
    "secureCloud": "lowestPrice input, gpuhunt's per-location query (same file as above)",
    "location": "public RunPod clients' data-center query `dataCenters { id name location "
                "storageSupport gpuAvailability(input: $input) { ... } }` (GpuAvailabilityInput "
                "with gpuCount); dataCenters, listed, gpuAvailability, gpuTypeId and available "
                "are in the real answer",
}


def sdk_query_text() -> str:
    spec = importlib.util.find_spec("runpod")
    assert spec is not None and spec.submodule_search_locations, "install '.[contract]'"
    root = Path(next(iter(spec.submodule_search_locations)))
    return (root / "api" / "queries" / "gpus.py").read_text()


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def real_answer_fields() -> set[str]:
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            found.update(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in FIX.glob("*_real.json"):
        walk(json.loads(path.read_text()))
    return found


def test_every_field_the_spider_asks_for_is_defined_by_the_sdk_or_documented():
    sdk = words(sdk_query_text())
    asked = (set(_TYPE_FIELDS.split()) | set(_STOCK_FIELDS.split()) | set(_DC_FIELDS.split())
             | set(_AVAILABILITY_FIELDS.split())
             | {"gpuCount", "secureCloud", "lowestPrice", "gpuTypes", "dataCenters",
                "gpuAvailability"})
    assert {"securePrice", "communityPrice", "memoryInGb", "maxGpuCount", "secureCloud",
            "communityCloud", "lowestPrice", "gpuCount", "gpuTypes", "id"} <= sdk & asked
    undocumented = asked - sdk - set(BEYOND_SDK) - real_answer_fields()
    assert not undocumented, f"fields neither in the runpod SDK nor documented: {undocumented}"
    # The list above stays honest: only fields the spider really asks for, and what a real
    # answer shows needs no other source.
    assert set(BEYOND_SDK) <= asked
    assert "stockStatus" in real_answer_fields()


def test_the_query_sent_uses_only_those_fields():
    query = stock_query(3)
    sent = words(query) - {"query", "GpuStock", "input", "true", "false"}
    sent = {w for w in sent if not re.fullmatch(r"(secure|community|datacenters)_\d+", w)}
    assert sent <= words(sdk_query_text()) | set(BEYOND_SDK) | real_answer_fields()
    assert "lowestPrice(input: {gpuCount: 3" in query  # the SDK's own input shape
