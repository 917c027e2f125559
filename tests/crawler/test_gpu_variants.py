"""Which variant of a GPU an offer is, as the pipeline picks it from the memory per GPU the
provider reports (or its size table gives): an H100 with 94 GB is the NVL, an A100 SXM with
40 GB the 40 GB board. Each answer runs through the real crawl of saved files (the spider,
then the pipelines' normalisation), so these are the models `prices` and the page show.
Answers: tests/fixtures/<provider>/ (their provenance files say which are real captures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuradar.crawler.parsing import parse_files
from tests.helpers import FIXTURES, spider_settings


def models(source: str, *files: Path) -> dict[str, set[tuple[str, float | None]]]:
    """instance type -> the (model, memory per GPU) pairs the pipeline gave its offers."""
    found: dict[str, set[tuple[str, float | None]]] = {}
    for row in parse_files(source, list(files), spider_settings(source)):
        if row.get("dropped") is None:
            found.setdefault(row["instance_type"], set()).add((row["gpu"], row["gpu_memory_gb"]))
    return found


def edited(tmp_path: Path, path: Path, edit: Any) -> Path:
    """A copy of the answer at `path` with `edit` applied to its parsed JSON."""
    answer = json.loads(path.read_bytes())
    edit(answer)
    copy = tmp_path / path.name
    copy.write_text(json.dumps(answer))
    return copy


# -- Azure: the memory comes from Azure's size table (crawler/spiders/azure.py, SERIES) ------
def test_azure_real_h100_v5_meter_is_the_sxm_board():
    """The real westus row `Standard_ND96is_noIB_H100_v5` (ND H100 v5: 8 x 80 GB)."""
    got = models("azure", FIXTURES / "azure" / "westus_real_rows.json")
    assert got == {"Standard_ND96is_noIB_H100_v5": {("H100-SXM-80GB", 80)}}


def test_azure_sizes_pick_the_variant_their_memory_says():
    """Two chained pages in the Retail Prices API's item format, real size names: the NC H100
    v5 (94 GB) is the NVL and the ND H100 v5 (80 GB) the SXM; the ND A100 v4 (80 GB) is the
    80 GB SXM board and the NC v3 V100 the 16 GB one."""
    got = models("azure", FIXTURES / "azure" / "prices_page1.json",
                 FIXTURES / "azure" / "prices_page2.json")
    assert got["Standard_NC40ads_H100_v5"] == {("H100-NVL-94GB", 94)}
    assert got["Standard_ND96isr_H100_v5"] == {("H100-SXM-80GB", 80)}
    assert got["Standard_ND96amsr_A100_v4"] == {("A100-SXM-80GB", 80)}
    assert got["Standard_NC24ads_A100_v4"] == {("A100-PCIE-80GB", 80)}
    assert got["Standard_NC6s_v3"] == {("V100-16GB", 16)}


# -- RunPod: `memoryInGb` of each gpuTypes entry ---------------------------------------------
RUNPOD = FIXTURES / "runpod" / "stock_1.json"  # the real capture's types, ids and memoryInGb


def test_runpod_types_are_the_variant_their_memory_says():
    got = models("runpod", RUNPOD)
    by_id = {name.split(" (")[0].removeprefix("1x "): pairs for name, pairs in got.items()}
    assert by_id["NVIDIA H100 80GB HBM3"] == {("H100-SXM-80GB", 80)}
    assert by_id["NVIDIA A100-SXM4-40GB"] == {("A100-SXM-40GB", 40)}
    assert by_id["NVIDIA A100 80GB PCIe"] == {("A100-PCIE-80GB", 80)}
    assert by_id["NVIDIA H200"] == {("H200-SXM-141GB", 141)}


def test_runpod_memory_that_contradicts_the_name_is_no_model(tmp_path):
    """The real H100 entry with only `memoryInGb` changed to 94 (the NVL's): its id says
    80 GB, so the offer keeps RunPod's own name (gpu_raw) instead of a guessed variant."""
    def to_94(answer: dict) -> None:
        for cloud in answer["data"].values():
            for entry in cloud if isinstance(cloud, list) else []:
                if entry.get("id") == "NVIDIA H100 80GB HBM3":
                    entry["memoryInGb"] = 94

    rows = [r for r in parse_files("runpod", [edited(tmp_path, RUNPOD, to_94)],
                                   spider_settings("runpod"))
            if r["instance_type"].startswith("1x NVIDIA H100 80GB HBM3")]
    assert rows
    assert {(r["gpu"], r["gpu_raw"], r["gpu_memory_gb"]) for r in rows} == {
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", 94)}


# -- Vast.ai: `gpu_ram` (MiB) of each offer ---------------------------------------------------
VAST = FIXTURES / "vastai"


def test_vastai_real_h100_offers_are_the_sxm_board():
    """The two real `H100 SXM` offers (gpu_ram 81559 MiB = 79.6 GB, within 10 % of 80)."""
    got = models("vastai", VAST / "bundles_h100_sxm_real.json")
    assert got == {"148199:1xH100_SXM": {("H100-SXM-80GB", 79.6)},
                   "59380:1xH100_SXM": {("H100-SXM-80GB", 79.6)}}


def test_vastai_a100_sxm4_is_the_board_its_gpu_ram_says():
    """Vast.ai names both A100 SXM4 boards alike; gpu_ram alone tells 40 GB from 80 GB."""
    got = models("vastai", VAST / "bundles_a100_sxm4.json")
    assert got == {"301001:8xA100_SXM4": {("A100-SXM-80GB", 80.0)},
                   "301002:1xA100_SXM4": {("A100-SXM-40GB", 40.0)}}


def test_vastai_a100_sxm4_without_gpu_ram_is_no_model(tmp_path):
    """The same answer with `gpu_ram` removed: which A100 it is is unknown, so it is not
    guessed (the offer keeps Vast.ai's name, gpu_raw)."""
    def no_ram(answer: dict) -> None:
        for offer in answer["offers"]:
            offer.pop("gpu_ram")

    rows = list(parse_files("vastai", [edited(tmp_path, VAST / "bundles_a100_sxm4.json", no_ram)],
                            spider_settings("vastai")))
    assert rows
    assert {(r["gpu"], r["gpu_raw"], r["gpu_memory_gb"]) for r in rows} == {
        ("A100 SXM4", "A100 SXM4", None)}
