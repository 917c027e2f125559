"""The accelerator catalog: real provider strings map to the right variant, unknowns never
guess, and every GPU, TPU and NPU knows its vendor, kind, memory and frameworks."""

from __future__ import annotations

import pytest

from gpuradar.core import gpus
from gpuradar.core.gpus import (
    CATALOG,
    FRAMEWORKS,
    KINDS,
    VENDORS,
    Accelerator,
    Gpu,
    families,
    lookup,
    match_family,
    parse_count_and_name,
    select,
    suggest,
)


def vast(mb: float) -> float:
    """Vast.ai reports gpu_ram in MB (MiB); the spider hands GB to lookup."""
    return mb / 1024


# (provider string, memory the provider reports or None, expected canonical name)
REAL_STRINGS: list[tuple[str, float | None, str]] = [
    # -- Vast.ai gpu_name with gpu_ram ---------------------------------------------------------
    ("H100 SXM", vast(81559), "H100-SXM-80GB"),
    ("H100 PCIE", vast(81559), "H100-PCIE-80GB"),
    ("H100 NVL", vast(95830), "H100-NVL-94GB"),
    ("H200", vast(143771), "H200-SXM-141GB"),
    ("H200 NVL", vast(143771), "H200-NVL-141GB"),
    ("A100 SXM4", vast(81920), "A100-SXM-80GB"),
    ("A100 SXM4", vast(40960), "A100-SXM-40GB"),
    ("A100 PCIE", vast(40960), "A100-PCIE-40GB"),
    ("A100 PCIE", vast(81920), "A100-PCIE-80GB"),
    ("A100X", vast(81920), "A100X"),
    ("RTX 4090", vast(24564), "RTX-4090"),
    ("RTX 5090", vast(32607), "RTX-5090"),
    ("RTX 3090", vast(24576), "RTX-3090"),
    ("RTX A6000", vast(49140), "RTX-A6000"),
    ("RTX 6000Ada", vast(49140), "RTX-6000-ADA"),
    ("RTX PRO 6000 WS", vast(97887), "RTX-PRO-6000"),
    ("RTX PRO 6000 S", vast(97887), "RTX-PRO-6000"),
    ("L40S", vast(46068), "L40S"),
    ("L40", vast(46068), "L40"),
    ("L4", vast(23034), "L4"),
    ("A40", vast(46068), "A40"),
    ("A10", vast(23028), "A10"),
    ("Tesla V100", vast(16384), "V100-16GB"),
    ("Tesla V100", vast(32768), "V100-32GB"),
    ("Tesla T4", vast(15360), "T4"),
    ("Q RTX 8000", vast(49152), "QUADRO-RTX-8000"),
    ("B200", vast(183359), "B200"),
    ("GH200 SXM", vast(97871), "GH200-96GB"),
    ("MI300X", vast(196592), "MI300X"),
    # -- RunPod gpuTypes id / displayName (memoryInGb where the name alone is ambiguous) -------
    ("AMD Instinct MI300X OAM", None, "MI300X"),
    ("MI300X", 192, "MI300X"),
    ("NVIDIA A100-SXM4-40GB", None, "A100-SXM-40GB"),
    ("A100 SXM 40GB", None, "A100-SXM-40GB"),
    ("NVIDIA A100 80GB PCIe", None, "A100-PCIE-80GB"),
    ("A100 PCIe", 80, "A100-PCIE-80GB"),
    ("NVIDIA A100-SXM4-80GB", None, "A100-SXM-80GB"),
    ("A100 SXM", 80, "A100-SXM-80GB"),
    ("NVIDIA B200", None, "B200"),
    ("B200", None, "B200"),
    ("NVIDIA B300 SXM6 AC", None, "B300"),
    ("B300", None, "B300"),
    ("NVIDIA GeForce RTX 3070", None, "RTX-3070"),
    ("RTX 3070", None, "RTX-3070"),
    ("NVIDIA GeForce RTX 4090", None, "RTX-4090"),
    ("NVIDIA GeForce RTX 5090", None, "RTX-5090"),
    ("NVIDIA H100 80GB HBM3", None, "H100-SXM-80GB"),
    ("H100 SXM", None, "H100-SXM-80GB"),
    ("NVIDIA H100 PCIe", None, "H100-PCIE-80GB"),
    ("H100 PCIe", None, "H100-PCIE-80GB"),
    ("NVIDIA H100 NVL", None, "H100-NVL-94GB"),
    ("NVIDIA H200", None, "H200-SXM-141GB"),
    ("H200 SXM", None, "H200-SXM-141GB"),
    ("NVIDIA L40S", None, "L40S"),
    ("NVIDIA L4", None, "L4"),
    ("NVIDIA RTX A6000", None, "RTX-A6000"),
    ("NVIDIA RTX 6000 Ada Generation", None, "RTX-6000-ADA"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None, "RTX-PRO-6000"),
    ("Tesla V100-SXM2-32GB", None, "V100-32GB"),
    # -- Lambda pricing page data-plan -----------------------------------------------------------
    ("NVIDIA A10", None, "A10"),
    ("NVIDIA A100 SXM", 40, "A100-SXM-40GB"),
    ("NVIDIA A100 SXM", 80, "A100-SXM-80GB"),
    ("NVIDIA B200 SXM6", None, "B200"),
    ("NVIDIA GH200", None, "GH200-96GB"),
    ("NVIDIA H100 PCIe", None, "H100-PCIE-80GB"),
    ("NVIDIA H100 SXM", None, "H100-SXM-80GB"),
    ("NVIDIA Quadro RTX 6000", None, "QUADRO-RTX-6000"),
    ("NVIDIA Tesla V100", None, "V100-16GB"),
    # -- Lambda API descriptions, name part with the memory in it --------------------------------
    ("H100 (80 GB SXM5)", None, "H100-SXM-80GB"),
    ("A100 (40 GB SXM4)", None, "A100-SXM-40GB"),
    ("A100 (80 GB SXM4)", None, "A100-SXM-80GB"),
    ("A10 (24 GB PCIe)", None, "A10"),
    ("A6000 (48 GB)", None, "RTX-A6000"),
    ("RTX 6000 (24 GB)", None, "QUADRO-RTX-6000"),
    ("V100 (16 GB)", None, "V100-16GB"),
    ("GH200 (96 GB)", None, "GH200-96GB"),
    ("B200 (180 GB SXM6)", None, "B200"),
    ("H100", 80, "H100-SXM-80GB"),
    ("H100 SXM5", None, "H100-SXM-80GB"),
    # -- Crusoe's price table: heading + form-factor tag (HGX: the SXM baseboard) -----------------
    ("NVIDIA H100 HGX", 80, "H100-SXM-80GB"),
    ("NVIDIA H200 HGX", 141, "H200-SXM-141GB"),
    ("NVIDIA A100 PCIe", 80, "A100-PCIE-80GB"),
    # -- Lium, Hyperbolic, Voltage Park ---------------------------------------------------------
    ("A100-SXM4-80GB", 80, "A100-SXM-80GB"),
    ("H200", 140, "H200-SXM-141GB"),
    ("h100 pcie", None, "H100-PCIE-80GB"),
    ("h100-sxm5-80gb", None, "H100-SXM-80GB"),
    # -- GCP accelerator ids ---------------------------------------------------------------------
    ("nvidia-tesla-t4", None, "T4"),
    ("nvidia-tesla-p4", None, "P4"),
    ("nvidia-tesla-v100", None, "V100-16GB"),
    ("nvidia-tesla-p100", None, "P100"),
    ("nvidia-tesla-a100", None, "A100-SXM-40GB"),
    ("nvidia-a100-80gb", None, "A100-SXM-80GB"),
    ("nvidia-l4", None, "L4"),
    ("nvidia-h100-80gb", None, "H100-SXM-80GB"),
    ("nvidia-h100-mega-80gb", None, "H100-SXM-80GB"),
    ("nvidia-h200-141gb", None, "H200-SXM-141GB"),
    ("nvidia-b200", None, "B200"),
    ("nvidia-gb200", None, "GB200"),
    ("nvidia-rtx-pro-6000", None, "RTX-PRO-6000"),
    # -- GCP SKU descriptions --------------------------------------------------------------------
    ("Nvidia Tesla T4", None, "T4"),
    ("Nvidia Tesla A100", None, "A100-SXM-40GB"),
    ("Nvidia A100 80GB", None, "A100-SXM-80GB"),
    ("Nvidia L4", None, "L4"),
    ("Nvidia H100 80GB", None, "H100-SXM-80GB"),
    ("Nvidia H100 80GB Plus", None, "H100-SXM-80GB"),
    ("Nvidia H200 141GB", None, "H200-SXM-141GB"),
    ("Nvidia B200", None, "B200"),
    ("Nvidia Tesla V100", None, "V100-16GB"),
    ("Nvidia Tesla P100", None, "P100"),
    ("Nvidia Tesla P4", None, "P4"),
    ("RTX 6000 96GB", None, "RTX-PRO-6000"),
    # -- AWS DescribeInstanceTypes (name + MiB memory, here in GiB) ------------------------------
    ("H100", 80, "H100-SXM-80GB"),
    ("H200", 141, "H200-SXM-141GB"),
    ("A100", 40, "A100-SXM-40GB"),
    ("A100", 80, "A100-SXM-80GB"),
    ("A10G", 24, "A10G"),
    ("L4", 22.35, "L4"),  # AWS reports usable GiB
    ("L40S", 44.7, "L40S"),
    ("T4", 16, "T4"),
    ("T4g", 16, "T4G"),
    ("V100", 16, "V100-16GB"),
    ("V100", 32, "V100-32GB"),
    ("M60", 8, "M60"),
    ("K80", 12, "K80"),
    ("B200", 179, "B200"),
    ("Radeon Pro V520", 8, "V520"),
    ("GB200", 185, "GB200"),
    # -- Azure -----------------------------------------------------------------------------------
    ("A100", 80, "A100-SXM-80GB"),
    ("H100", None, "H100-SXM-80GB"),
    ("H100 NVL", None, "H100-NVL-94GB"),
    ("H200", None, "H200-SXM-141GB"),
    ("A10", None, "A10"),
    ("T4", None, "T4"),
    ("V100", 16, "V100-16GB"),
    ("M60", None, "M60"),
    ("MI300X", None, "MI300X"),
    ("V710", None, "V710"),
    ("GB200", None, "GB200"),
    # -- OCI shape GPU names ---------------------------------------------------------------------
    ("P100", None, "P100"),
    ("V100", 16, "V100-16GB"),
    ("A10", None, "A10"),
    ("A100", 40, "A100-SXM-40GB"),
    ("A100-v2", None, "A100-SXM-80GB"),
    ("H100", None, "H100-SXM-80GB"),
    ("H200", None, "H200-SXM-141GB"),
    ("L40S", None, "L40S"),
    ("MI300X", None, "MI300X"),
    ("MI355X", None, "MI355X"),
    ("B200", None, "B200"),
    ("GB200", None, "GB200"),
    ("B300", None, "B300"),
    ("GB300", None, "GB300"),
    ("RTXPRO", None, "RTX-PRO-6000"),
    # -- Alibaba GPUSpec (with GPUMemorySize where the name is ambiguous) ------------------------
    ("NVIDIA A10", None, "A10"),
    ("NVIDIA T4", None, "T4"),
    ("NVIDIA V100", 16, "V100-16GB"),
    ("NVIDIA V100", 32, "V100-32GB"),
    ("NVIDIA A100", 40, "A100-SXM-40GB"),
    ("NVIDIA A100", 80, "A100-SXM-80GB"),
    ("NVIDIA P100", None, "P100"),
    ("NVIDIA P4", None, "P4"),
    ("NVIDIA L20", None, "L20"),
    ("NVIDIA H20", None, "H20"),
    ("NVIDIA A800", None, "A800-SXM-80GB"),
    ("NVIDIA H800", None, "H800-SXM-80GB"),
    # -- Huawei quota:gpu / info:gpus names ------------------------------------------------------
    ("nvidia-v100", 32, "V100-32GB"),
    ("nvidia-t4", None, "T4"),
    ("nvidia-a100", 80, "A100-SXM-80GB"),
    ("nvidia-a10", None, "A10"),
    ("nvidia-p100", None, "P100"),
    ("nvidia-p4", None, "P4"),
    ("Ascend-910B", None, "ASCEND-910B"),
    ("ascend-910b", None, "ASCEND-910B"),
    ("Ascend 910B", None, "ASCEND-910B"),
    ("nvidia-h800", None, "H800-SXM-80GB"),
    # -- AutoDL gpu_name -------------------------------------------------------------------------
    ("RTX 4090", None, "RTX-4090"),
    ("RTX 4090D", None, "RTX-4090D"),
    ("RTX 3090", None, "RTX-3090"),
    ("RTX 3080", None, "RTX-3080"),
    ("RTX 3080 Ti", None, "RTX-3080-TI"),
    ("RTX 5090", None, "RTX-5090"),
    ("RTX A4000", None, "RTX-A4000"),
    ("RTX A5000", None, "RTX-A5000"),
    ("L20", None, "L20"),
    ("H20", None, "H20"),
    ("H800", None, "H800-SXM-80GB"),
    ("A800", None, "A800-SXM-80GB"),
    ("A800-80GB", None, "A800-SXM-80GB"),
    ("V100-32GB", None, "V100-32GB"),
    ("Tesla T4", None, "T4"),
    ("华为昇腾910B", None, "ASCEND-910B"),
    ("昇腾910B", None, "ASCEND-910B"),
    # -- GCP TPU names: SKU description words (Cloud Billing Catalog), accelerator types, GKE ---
    ("Tpu-v2", None, "TPU-V2"),
    ("Tpu-v3", None, "TPU-V3"),
    ("Tpu-v4", None, "TPU-V4"),
    ("TpuV5e", None, "TPU-V5E"),
    ("TpuV5p", None, "TPU-V5P"),
    ("TpuV6e", None, "TPU-V6E"),
    ("v5litepod", None, "TPU-V5E"),
    ("tpu-v5-lite-podslice", None, "TPU-V5E"),
    ("tpu-v5p-slice", None, "TPU-V5P"),
    ("tpu-v6e-slice", None, "TPU-V6E"),
    ("TPU v5e", 16, "TPU-V5E"),
    ("Trillium", None, "TPU-V6E"),
    ("TPU7x", None, "TPU-7X"),  # the SKU's "TPU7x running in Americas"
    ("TPU7x", 192, "TPU-7X"),
    # -- AWS accelerator names (DescribeInstanceTypes NeuronInfo / InferenceAcceleratorInfo) ---
    ("Trainium", 32, "TRAINIUM"),
    ("Trainium2", 96, "TRAINIUM2"),
    ("Inferentia", 8, "INFERENTIA"),
    ("Inferentia2", 32, "INFERENTIA2"),
    ("Gaudi HL-205", 32, "GAUDI-HL205"),
    ("AWS Trainium", None, "TRAINIUM"),
    ("Intel Gaudi", None, "GAUDI-HL205"),
]


@pytest.mark.parametrize(("raw", "memory_gb", "expected"), REAL_STRINGS)
def test_real_provider_strings_map_to_the_right_variant(
    raw: str, memory_gb: float | None, expected: str
) -> None:
    gpu = lookup(raw, memory_gb)
    assert gpu is not None, f"{raw!r} ({memory_gb} GB) matched nothing"
    assert gpu.name == expected


UNKNOWN = [
    "NVIDIA",
    "",
    "   ",
    "Some Future GPU X9",
    "vGPU-32GB",  # AutoDL: a slice of an unnamed card
    "GPU H",  # Alibaba internal names no public source explains
    "L20N",
    "G49",
    "NVIDIA L20N",
    "nvidia-l2",  # Huawei: no public source confirms what it is
    "RTX 9999",
    "H100X",
    "A1000",
]


@pytest.mark.parametrize("raw", UNKNOWN)
def test_unknown_strings_are_never_guessed(raw: str) -> None:
    assert lookup(raw) is None
    assert lookup(raw, 80) is None


@pytest.mark.parametrize(
    "raw",
    [
        "A100",  # 40 or 80 GB
        "NVIDIA A100",
        "nvidia-a100",
        "A100 SXM4",
        "A100 SXM",
        "A100 PCIE",
        "V100",  # 16 or 32 GB
        "Tesla V100",
        "RTX 6000",  # Quadro RTX 6000, RTX 6000 Ada or RTX PRO 6000
    ],
)
def test_ambiguous_strings_need_the_memory(raw: str) -> None:
    assert lookup(raw) is None


@pytest.mark.parametrize(
    ("memory_gb", "expected"),
    [(24, "QUADRO-RTX-6000"), (48, "RTX-6000-ADA"), (96, "RTX-PRO-6000"), (64, None)],
)
def test_memory_picks_among_the_three_rtx_6000_cards(memory_gb: float, expected: str) -> None:
    gpu = lookup("RTX 6000", memory_gb)
    assert (gpu.name if gpu else None) == expected


def test_memory_outside_tolerance_matches_nothing() -> None:
    assert lookup("A100", 60) is None
    assert lookup("RTX 4090", 48) is None  # a modded 48 GB card is not the catalog's 4090
    assert lookup("L4", 20) is None  # 17 % short of 24 GB
    assert lookup("L4", 22) is not None  # 8 % short: usable-memory reporting


def test_memory_in_the_string_contradicting_the_memory_given_matches_nothing() -> None:
    assert lookup("nvidia-a100-80gb", 40) is None
    assert lookup("A100-SXM4-40GB", 80) is None
    assert lookup("nvidia-a100-80gb", 81.9).name == "A100-SXM-80GB"


def test_memory_widens_a_bare_name_to_its_family() -> None:
    # AWS/Azure-style "H100" with 94 GB can only be the NVL card.
    assert lookup("H100", 94).name == "H100-NVL-94GB"
    # GCP's V100 is 16 GB, but a 32 GB report under the same string still resolves.
    assert lookup("NVIDIA Tesla V100", 32).name == "V100-32GB"


def test_form_factor_words_narrow_the_family() -> None:
    assert lookup("A800 PCIe").name == "A800-PCIE-80GB"
    assert lookup("H800 PCIe").name == "H800-PCIE-80GB"
    assert lookup("NVIDIA A100 PCIe", 40).name == "A100-PCIE-40GB"
    assert lookup("L40S SXM") is None  # no such card


@pytest.mark.parametrize("memory", [0, -1, -24])
def test_zero_or_negative_memory_counts_as_unknown(memory: float) -> None:
    assert lookup("RTX 4090", memory).name == "RTX-4090"
    assert lookup("A100", memory) is None  # 40 or 80 GB: unknown without a memory
    assert lookup("A100 80GB", memory).name == "A100-SXM-80GB"  # the string's memory counts


def test_case_whitespace_and_punctuation_do_not_matter() -> None:
    for raw in ("nvidia geforce rtx 4090", "  NVIDIA_GeForce_RTX-4090 ", "NVIDIAGeForceRTX4090"):
        assert lookup(raw).name == "RTX-4090"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("AMD Instinct MI355X OAM", "MI355X"),
        ("AMD MI325X", "MI325X"),
        ("NVIDIA Tesla P100-PCIE-16GB", "P100"),
        ("GeForce RTX 3080 Ti", "RTX-3080-TI"),
        ("Huawei Ascend-910B", "ASCEND-910B"),
    ],
)
def test_brand_prefixes_are_dropped(raw: str, expected: str) -> None:
    assert lookup(raw).name == expected


def test_quadro_is_not_stripped_into_an_ambiguous_rtx_6000() -> None:
    assert lookup("Quadro RTX 6000").name == "QUADRO-RTX-6000"
    assert lookup("NVIDIA Quadro RTX 6000", 24).name == "QUADRO-RTX-6000"
    assert lookup("Quadro RTX 6000", 48) is None


@pytest.mark.parametrize("gpu", list(CATALOG.values()), ids=lambda g: g.name)
def test_every_alias_resolves_to_its_own_variant_given_its_memory(gpu: Gpu) -> None:
    for alias in gpu.aliases:
        found = lookup(alias, gpu.memory_gb)
        assert found is not None and found.name == gpu.name, alias


@pytest.mark.parametrize("gpu", list(CATALOG.values()), ids=lambda g: g.name)
def test_every_canonical_name_resolves_to_itself(gpu: Gpu) -> None:
    assert lookup(gpu.name) == gpu
    assert lookup(gpu.name.lower(), gpu.memory_gb) == gpu
    assert match_family(gpu.name) == [gpu]


# -- catalog integrity -------------------------------------------------------------------------
def test_catalog_keys_are_the_canonical_names() -> None:
    assert all(key == gpu.name for key, gpu in CATALOG.items())
    assert len(CATALOG) == len(gpus._GPUS), "duplicate canonical name"


REQUIRED = [
    "B200", "B300", "GB200", "GB300", "H200-SXM-141GB", "H200-NVL-141GB", "H100-SXM-80GB",
    "H100-PCIE-80GB", "H100-NVL-94GB", "H800-SXM-80GB", "H800-PCIE-80GB", "H20", "GH200-96GB",
    "A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "A800-SXM-80GB",
    "A800-PCIE-80GB", "L40S", "L40", "L20", "L4", "A10", "A10G", "A40", "A16", "RTX-PRO-6000",
    "RTX-6000-ADA", "RTX-A6000", "RTX-A5000", "RTX-A4000", "QUADRO-RTX-6000", "QUADRO-RTX-8000",
    "RTX-5090", "RTX-4090", "RTX-4080", "RTX-3090", "RTX-3080", "RTX-3070", "V100-16GB",
    "V100-32GB", "T4", "T4G", "P100", "P4", "K80", "M60", "A2", "MI300X", "MI325X", "MI355X",
    "MI250X", "MI250", "V520", "V710", "ASCEND-910B",
    "TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5E", "TPU-V5P", "TPU-V6E", "TPU-7X", "TRAINIUM",
    "TRAINIUM2", "INFERENTIA", "INFERENTIA2", "GAUDI-HL205",
]  # fmt: skip


def test_catalog_holds_every_accelerator_the_providers_sell() -> None:
    assert set(REQUIRED) <= set(CATALOG)


def test_vendor_and_family_are_consistent() -> None:
    vendors: dict[str, str] = {}
    for gpu in CATALOG.values():
        assert gpu.vendor in VENDORS, gpu.name
        assert gpu.kind in KINDS, gpu.name
        assert set(gpu.frameworks) <= set(FRAMEWORKS), gpu.name
        assert vendors.setdefault(gpu.family, gpu.vendor) == gpu.vendor, gpu.family
        assert gpu.memory_gb > 0, gpu.name
        assert gpu.architecture, gpu.name
        assert gpu.form_factor in {"SXM", "PCIe", "NVL", "OAM", "superchip", ""}, gpu.name
        assert gpu.aliases, gpu.name
    assert Accelerator is Gpu


@pytest.mark.parametrize(
    ("name", "vendor", "kind", "memory_gb", "frameworks"),
    [
        ("H100-SXM-80GB", "NVIDIA", "GPU", 80, ("CUDA",)),
        ("MI300X", "AMD", "GPU", 192, ("ROCm",)),
        ("V520", "AMD", "GPU", 8, ()),  # a graphics card, not on ROCm's list
        ("TPU-V2", "Google", "TPU", 16, ("XLA/JAX",)),
        ("TPU-V3", "Google", "TPU", 32, ("XLA/JAX",)),
        ("TPU-V4", "Google", "TPU", 32, ("XLA/JAX",)),
        ("TPU-V5E", "Google", "TPU", 16, ("XLA/JAX",)),
        ("TPU-V5P", "Google", "TPU", 95, ("XLA/JAX",)),
        ("TPU-V6E", "Google", "TPU", 32, ("XLA/JAX",)),
        ("TRAINIUM", "AWS", "NPU", 32, ("Neuron",)),
        ("TRAINIUM2", "AWS", "NPU", 96, ("Neuron",)),
        ("INFERENTIA", "AWS", "NPU", 8, ("Neuron",)),
        ("INFERENTIA2", "AWS", "NPU", 32, ("Neuron",)),
        ("GAUDI-HL205", "Intel", "NPU", 32, ("SynapseAI",)),
        ("ASCEND-910B", "Huawei", "NPU", 64, ("CANN",)),
    ],
)
def test_every_accelerator_knows_vendor_kind_memory_and_frameworks(
    name: str, vendor: str, kind: str, memory_gb: float, frameworks: tuple[str, ...]
) -> None:
    entry = CATALOG[name]
    assert (entry.vendor, entry.kind, entry.memory_gb, entry.frameworks) == (
        vendor, kind, memory_gb, frameworks)


@pytest.mark.parametrize(
    ("name", "bf16", "fp8"),
    [("TPU-V5E", 197, None), ("TPU-V5P", 459, None), ("TPU-V6E", 918, None),
     ("TPU-7X", 2307, 4614),
     ("TRAINIUM", 190, 190), ("TRAINIUM2", 667, 1299), ("INFERENTIA2", 190, 190),
     ("GAUDI-HL205", None, None)],
)
def test_accelerator_figures_from_the_vendors_docs(name: str, bf16, fp8) -> None:
    assert (CATALOG[name].bf16_tflops, CATALOG[name].fp8_tflops) == (bf16, fp8)


def test_select_by_vendor_kind_and_framework() -> None:
    google = {g.name for g in select(vendor="google")}
    assert google == {"TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5E", "TPU-V5P", "TPU-V6E", "TPU-7X"}
    assert {g.name for g in select(kind="tpu")} == google
    assert {g.name for g in select(vendor="AWS")} == {
        "TRAINIUM", "TRAINIUM2", "INFERENTIA", "INFERENTIA2"}
    npus = {g.name for g in select(kind="NPU")}
    assert npus == {g.name for g in select(kind="asic")}
    assert {"TRAINIUM", "GAUDI-HL205", "ASCEND-910B"} <= npus and not npus & google
    assert {g.name for g in select(framework="neuron")} == {g.name for g in select(vendor="aws")}
    assert all(g.vendor == "NVIDIA" for g in select(framework="CUDA"))
    assert {g.name for g in select(vendor="google", kind="GPU")} == set()
    assert select(vendor="Nokia") == [] and select(kind="FPGA") == []


def test_fp8_is_twice_bf16_where_both_are_published() -> None:
    # A sparse figure mixed with a dense one shows up as a 1:1 or 4:1 ratio. (Only GPUs:
    # Trainium and Inferentia2 run cFP8 at their BF16 rate.)
    for gpu in select(kind="GPU"):
        if gpu.bf16_tflops is not None and gpu.fp8_tflops is not None:
            assert 1.9 <= gpu.fp8_tflops / gpu.bf16_tflops <= 2.1, gpu.name


@pytest.mark.parametrize(
    ("name", "memory_gb", "architecture", "bf16", "fp8"),
    [
        ("H100-SXM-80GB", 80, "Hopper", 989.5, 1979),
        ("H100-PCIE-80GB", 80, "Hopper", 756.5, 1513),
        ("H200-SXM-141GB", 141, "Hopper", 989.5, 1979),
        ("A100-SXM-80GB", 80, "Ampere", 312, None),
        ("L40S", 48, "Ada Lovelace", 362.05, 733),
        ("MI300X", 192, "CDNA3", 1307.4, 2614.9),
        ("B200", 180, "Blackwell", 2250, 4500),
        ("T4", 16, "Turing", 65, None),
        ("ASCEND-910B", 64, "Da Vinci", None, None),
    ],
)
def test_spot_check_datasheet_figures(
    name: str, memory_gb: float, architecture: str, bf16: float | None, fp8: float | None
) -> None:
    gpu = CATALOG[name]
    assert (gpu.memory_gb, gpu.architecture, gpu.bf16_tflops, gpu.fp8_tflops) == (
        memory_gb,
        architecture,
        bf16,
        fp8,
    )


def test_no_alias_key_is_shared_by_variants_memory_cannot_tell_apart() -> None:
    for key, candidates in gpus._ALIASES.items():
        sizes = [g.memory_gb for g in candidates]
        assert len(sizes) == len(set(sizes)), (key, [g.name for g in candidates])


# -- families, match_family, suggest -----------------------------------------------------------
def test_families_are_sorted_and_unique() -> None:
    names = families()
    assert names == sorted(set(names))
    assert {"H100", "A100", "RTX-4090", "L40S", "910B", "MI300X", "TPU-v5e", "Trainium",
            "Gaudi"} <= set(names)


def test_match_family_h100_is_every_h100_and_nothing_else() -> None:
    found = {g.name for g in match_family("H100")}
    assert found == {"H100-SXM-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"}
    assert not any(n.startswith(("H200", "GH200", "H800")) for n in found)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("h100", {"H100-SXM-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"}),
        ("h100-sxm-80gb", {"H100-SXM-80GB"}),
        ("H100 SXM", {"H100-SXM-80GB"}),
        ("A100-80GB", {"A100-SXM-80GB", "A100-PCIE-80GB"}),
        ("a100 40gb", {"A100-SXM-40GB", "A100-PCIE-40GB"}),
        ("A100 PCIe", {"A100-PCIE-40GB", "A100-PCIE-80GB"}),
        ("4090", {"RTX-4090"}),
        ("RTX 4090", {"RTX-4090"}),
        ("rtx-4090", {"RTX-4090"}),
        ("A6000", {"RTX-A6000"}),
        ("910B", {"ASCEND-910B"}),
        ("Ascend 910B", {"ASCEND-910B"}),
        ("V100", {"V100-16GB", "V100-32GB"}),
        ("mi300x", {"MI300X"}),
        ("NVIDIA H100 80GB HBM3", {"H100-SXM-80GB", "H100-PCIE-80GB"}),
        ("nvidia-tesla-a100", {"A100-SXM-40GB"}),
        ("NVIDIA Tesla V100", {"V100-16GB"}),
        ("nvidia h100", {"H100-SXM-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"}),
        ("nvidia-h100-mega-80gb", {"H100-SXM-80GB"}),
        ("A100-96GB", set()),
        ("TPU v5e", {"TPU-V5E"}),
        ("tpu-v4", {"TPU-V4"}),
        ("v5litepod", {"TPU-V5E"}),
        ("Trainium", {"TRAINIUM"}),
        ("trainium2", {"TRAINIUM2"}),
        ("Gaudi", {"GAUDI-HL205"}),
        ("TPU", {"TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5E", "TPU-V5P", "TPU-V6E", "TPU-7X"}),
        ("Some Future GPU X9", set()),
        ("", set()),
        ("   ", set()),
    ],
)
def test_match_family(query: str, expected: set[str]) -> None:
    assert {g.name for g in match_family(query)} == expected


def test_a_kind_matches_every_accelerator_of_that_kind() -> None:
    assert {g.kind for g in match_family("npu")} == {"NPU"}
    assert match_family("ASIC") == match_family("NPU")
    assert all(g.kind == "GPU" for g in match_family("GPU")) and len(match_family("GPU")) > 50


def test_suggest_fixes_a_typo() -> None:
    assert suggest("Trainum") == "Trainium"
    assert suggest("H10O") == "H100"
    assert suggest("h10o") == "H100"
    assert suggest("L4OS") == "L40S"
    assert suggest("MI300") == "MI300X"


@pytest.mark.parametrize("query", ["", "Some Future GPU X9", "zzzz"])
def test_suggest_is_none_when_nothing_is_close(query: str) -> None:
    assert suggest(query) is None


# -- Tencent "N * NAME" -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("desc", "count", "name", "memory_gb", "expected"),
    [
        ("1 * NVIDIA T4", 1.0, "NVIDIA T4", None, "T4"),
        ("1/4 * NVIDIA T4", 0.25, "NVIDIA T4", None, "T4"),
        ("8 * NVIDIA A100", 8.0, "NVIDIA A100", 40, "A100-SXM-40GB"),
        ("8 * NVIDIA V100", 8.0, "NVIDIA V100", 32, "V100-32GB"),
        ("1 * NVIDIA A10", 1.0, "NVIDIA A10", None, "A10"),
        ("2 * NVIDIA A10", 2.0, "NVIDIA A10", None, "A10"),
        ("8 * NVIDIA H800", 8.0, "NVIDIA H800", None, "H800-SXM-80GB"),
        ("8 * NVIDIA A800", 8.0, "NVIDIA A800", None, "A800-SXM-80GB"),
        ("1 * NVIDIA L20", 1.0, "NVIDIA L20", None, "L20"),
        ("8 * NVIDIA H20", 8.0, "NVIDIA H20", None, "H20"),
    ],
)
def test_tencent_gpu_desc(
    desc: str, count: float, name: str, memory_gb: float | None, expected: str
) -> None:
    assert parse_count_and_name(desc) == (count, name)
    assert lookup(name, memory_gb).name == expected


def test_parse_count_and_name_example() -> None:
    assert parse_count_and_name("1/4 * NVIDIA T4") == (0.25, "NVIDIA T4")
    assert parse_count_and_name("  2*NVIDIA A10  ") == (2.0, "NVIDIA A10")


@pytest.mark.parametrize(
    "desc", ["NVIDIA T4", "", "0 * NVIDIA T4", "1/0 * NVIDIA T4", "8 *", "* NVIDIA T4"]
)
def test_parse_count_and_name_rejects_other_text(desc: str) -> None:
    assert parse_count_and_name(desc) is None


def test_the_memory_of_each_gpu_in_real_captures_is_the_catalogs() -> None:
    """The catalog's memory per GPU is a datasheet fact; the providers' real answers state it
    too (RunPod `memoryInGb`, Lambda's page `VRAM/GPU`, both in whole GB): they must agree,
    since rules like `any 80GB+ GPU` and the recommender read the catalog."""
    from scrapy.settings import Settings

    from gpuradar.crawler.spiders.lambda_ import LambdaSpider
    from gpuradar.crawler.spiders.runpod import RunpodSpider
    from tests.helpers import FIXTURES, response

    stated: dict[str, set[float]] = {}
    runpod = RunpodSpider()
    runpod.settings = Settings({"GPURADAR_SOURCES": {}})
    for name in ("gputypes_real.json", "gputypes_datacenters_real.json"):
        for item in runpod.parse_file(response(FIXTURES / "runpod" / name,
                                               "https://api.runpod.io/graphql")):
            stated.setdefault(item.gpu, set()).add(item.gpu_memory_gb)
    lam = LambdaSpider()
    lam.settings = Settings({"GPURADAR_SOURCES": {}})
    for item in lam.parse_pricing_page(response(FIXTURES / "lambda" / "pricing_excerpt_real.html",
                                                "https://lambda.ai/pricing", kind="html")):
        stated.setdefault(item.gpu, set()).add(item.gpu_memory_gb)
    checked = {}
    for raw, sizes in stated.items():
        for memory in sizes - {None}:
            gpu = gpus.lookup(raw, memory)
            if gpu is not None:
                checked[gpu.name] = (gpu.memory_gb, memory)
    assert {name: c for name, c in checked.items() if c[0] != c[1]} == {}
    assert len(checked) >= 12  # the captures name a dozen catalogued models


@pytest.mark.parametrize(("query", "meant"), [
    ("H010", "H100"),   # two neighbours swapped: one slip
    ("H001", None),     # two digits apart swapped: not one slip
    ("L4SX", None),     # two neighbours changed, only one of them from the name
    ("H1000X", None),   # two characters too many
    ("HZ10", None),     # two neighbours changed, only one of them from the name, in the
                        # other order
    ("AG200", None),    # the same, the character not from the name (A) sorting before
                        # the one it replaced (GB200's B)
    ("RTAINIUX", None),  # a swap and a third slip
])
def test_a_suggestion_is_made_only_for_one_slip_of_the_keyboard(query: str,
                                                                meant: str | None) -> None:
    assert suggest(query) == meant


def test_a_memory_given_is_a_constraint_however_small() -> None:
    """A provider stating 0.5 GB for an H100 contradicts it: nothing matches (never guess)."""
    assert lookup("H100 SXM", 0.5) is None and lookup("H100 SXM").name == "H100-SXM-80GB"


def test_a_fragment_of_a_model_number_names_no_family() -> None:
    """RTX cards are known by their bare number ('4090'); other models are not ('00' is not
    GH200, '00x' not MI300X)."""
    assert [g.name for g in match_family("4090")] == ["RTX-4090"]
    assert match_family("00") == [] and match_family("00x") == []


def test_a_stated_memory_exactly_10_percent_off_the_name_still_matches() -> None:
    """Providers round and mix GB and GiB: up to 10 % between the memory in the name and the
    memory stated is the same card."""
    assert lookup("H100 80GB", 72.0).name == "H100-SXM-80GB"
    assert lookup("H100 80GB", 71.0) is None


def test_a_form_factor_word_picks_the_variant_and_two_of_them_pick_none() -> None:
    assert lookup("A800 PCIe").name == "A800-PCIE-80GB"
    assert lookup("A800 SXM").name == "A800-SXM-80GB"
    assert lookup("H100 SXM PCIe") is None  # contradicting words: never guess
    assert lookup("NVIDIA H100 NVL NVL").name == "H100-NVL-94GB"  # said twice: still one


def test_a_name_with_no_slip_is_its_own_suggestion() -> None:
    """A10 and L4 are real cards one key away from A100 and L40: asked about an exact name,
    suggest names that card, not its neighbour."""
    assert suggest("A10") == "A10"
    assert suggest("L4") == "L4"


def test_chinese_providers_ascend_names_are_read_as_ascend() -> None:
    """Chinese listings write Huawei's NPUs in Chinese (昇腾 = Ascend, 华为 = Huawei):
    '昇腾910' is the 32 GB Ascend 910, not an unknown '910'; '昇腾910B' stays the 910B."""
    assert lookup("昇腾910").name == "ASCEND-910"
    assert lookup("华为昇腾910").name == "ASCEND-910"
    assert lookup("昇腾910B").name == "ASCEND-910B"


# -- precision support (sources in gpus.py's _ARCH_PRECISIONS and docs/recommend.md) --------
@pytest.mark.parametrize("name", ["V100-16GB", "V100-32GB", "T4", "QUADRO-RTX-6000",
                                  "QUADRO-RTX-8000"])
def test_volta_and_turing_compute_in_fp16_but_have_no_bf16(name: str) -> None:
    # NVIDIA's V100 and Turing whitepapers: FP16 Tensor Cores; BF16/TF32 are new in Ampere.
    assert gpus.precision_support(name, "fp16") is True
    assert gpus.precision_support(name, "bf16") is False
    assert gpus.precision_support(name, "tf32") is False
    assert gpus.precision_support(name, "fp8") is False


@pytest.mark.parametrize(("name", "bf16", "fp8", "fp4"), [
    ("A100-SXM-80GB", True, False, False),   # Ampere adds BF16/TF32, no FP8
    ("RTX-3090", True, False, False),        # GA102 whitepaper: same 3rd-gen Tensor Cores
    ("L4", True, True, False),               # Ada: FP8
    ("H100-SXM-80GB", True, True, False),    # Hopper: FP8 Transformer Engine
    ("B200", True, True, True),              # Blackwell: FP4
    ("MI250X", True, False, False),          # CDNA 2: FP8 arrives with CDNA 3
    ("MI300X", True, True, False),           # CDNA 3: FP8, no FP4
    ("MI355X", True, True, True),            # CDNA 4: FP4
    ("TRAINIUM", True, True, False),         # NeuronCore-v2: cFP8, BF16
    ("TPU-V5E", True, None, None),           # TPUs: bf16; nothing confirms fp8
    ("TPU-7X", True, True, None),            # Ironwood: FP8 in hardware (Google's TPU7x page)
])
def test_newer_formats_come_with_their_architecture(name, bf16, fp8, fp4) -> None:
    assert (gpus.precision_support(name, "bf16"), gpus.precision_support(name, "fp8"),
            gpus.precision_support(name, "fp4")) == (bf16, fp8, fp4)


def test_unconfirmed_precisions_are_unknown_not_assumed() -> None:
    assert gpus.precision_support("TPU-V6E", "fp16") is None
    assert gpus.precision_support("P4", "fp16") is None  # the P4 datasheet lists no FP16 rate
    assert gpus.precision_support("P100", "fp16") is True
    assert gpus.precision_support("ASCEND-910", "bf16") is None
    assert gpus.precision_support("NOT-A-GPU", "bf16") is None
    assert gpus.precision_support("H100-SXM-80GB", "int3") is None


@pytest.mark.parametrize("gpu", gpus.CATALOG.values(), ids=lambda g: g.name)
def test_every_accelerator_has_a_precision_row_consistent_with_its_throughput(gpu) -> None:
    known = {p: gpus.precision_support(gpu.name, p) for p in gpus.PRECISIONS}
    assert any(v is not None for v in known.values()), gpu.name
    # A published FP8 rate and "no FP8" cannot both be true.
    if gpu.fp8_tflops:
        assert known["fp8"] is not False, gpu.name
