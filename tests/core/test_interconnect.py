"""What links an offer's GPUs: the published instance families, then the form factor."""

from __future__ import annotations

import pytest

from gpuradar.core.interconnect import fast_inter, fast_intra, interconnect_for


def links(source: str, instance_type: str, gpu: str, count: float) -> tuple:
    info = interconnect_for(source, instance_type, gpu, count)
    return info["intra_node"], info["inter_node"], info["basis"]


@pytest.mark.parametrize(("source", "instance_type", "gpu", "count", "expected"), [
    # AWS accelerated computing pages: P5/P5e/P5en NVSwitch + 3200 Gbps EFA, P4d NVSwitch +
    # 400 Gbps EFA, P3dn NVLink + EFA, P3 NVLink without EFA.
    ("aws", "p5.48xlarge", "H100-SXM-80GB", 8, ("nvswitch", "efa", "published")),
    ("aws", "p5en.48xlarge", "H200-SXM-141GB", 8, ("nvswitch", "efa", "published")),
    ("aws", "p6-b200.48xlarge", "B200", 8, ("nvswitch", "efa", "published")),
    ("aws", "p4d.24xlarge", "A100-SXM-40GB", 8, ("nvswitch", "efa", "published")),
    ("aws", "p3dn.24xlarge", "V100-32GB", 8, ("nvlink", "efa", "published")),
    ("aws", "p3.16xlarge", "V100-16GB", 8, ("nvlink", None, "published")),
    ("aws", "p5.4xlarge", "H100-SXM-80GB", 1, (None, None, "published")),
    # G sizes with EFA (AWS's EFA device-plugin chart, describe-instance-types): PCIe cards
    # inside, as the form factor says, EFA between machines.
    ("aws", "g5.48xlarge", "A10G", 8, ("pcie", "efa", "published")),
    ("aws", "g6e.12xlarge", "L40S", 4, ("pcie", "efa", "published")),
    ("aws", "g6e.8xlarge", "L40S", 1, (None, "efa", "published")),
    ("aws", "dl1.24xlarge", "GAUDI-HL205", 8, (None, "efa", "published")),
    # Azure ND pages (ndh100v5-series, ndma100v4-series, ndmi300xv5-series): NVSwitch +
    # InfiniBand per GPU; MI300X Infinity Fabric; nca100v4-series: A100 PCIe cards.
    ("azure", "Standard_ND96isr_H100_v5", "H100-SXM-80GB", 8,
     ("nvswitch", "infiniband", "published")),
    ("azure", "Standard_ND96amsr_A100_v4", "A100-SXM-80GB", 8,
     ("nvswitch", "infiniband", "published")),
    ("azure", "Standard_ND96isr_MI300X_v5", "MI300X", 8,
     ("infinity-fabric", "infiniband", "published")),
    ("azure", "Standard_NC96ads_A100_v4", "A100-PCIE-80GB", 4, ("pcie", None, "published")),
    # GCP: A3 High GPUDirect-TCPX, A3 Mega TCPXO, A3 Ultra / A4 RDMA; smaller A3 no fabric.
    ("gcp", "a3-highgpu-8g", "H100-SXM-80GB", 8, ("nvswitch", "gpudirect-tcpx", "published")),
    ("gcp", "a3-megagpu-8g", "H100-SXM-80GB", 8, ("nvswitch", "gpudirect-tcpxo", "published")),
    ("gcp", "a3-ultragpu-8g", "H200-SXM-141GB", 8, ("nvswitch", "rdma", "published")),
    ("gcp", "a3-highgpu-4g", "H100-SXM-80GB", 4, ("nvswitch", None, "published")),
    ("gcp", "a2-ultragpu-8g", "A100-SXM-80GB", 8, ("nvswitch", None, "published")),
    # OCI bare metal: RDMA cluster networks.
    ("oci", "BM.GPU.H100.8", "H100-SXM-80GB", 8, ("nvswitch", "rdma", "published")),
    ("oci", "BM.GPU4.8", "A100-SXM-40GB", 8, ("nvswitch", "rdma", "published")),
    ("oci", "BM.GPU.MI300X.8", "MI300X", 8, ("infinity-fabric", "rdma", "published")),
    # Lambda: HGX SXM NVSwitch, no InfiniBand outside 1-Click Clusters.
    ("lambda", "gpu_8x_h100_sxm5", "H100-SXM-80GB", 8, ("nvswitch", None, "published")),
    ("lambda", "gpu_8x_v100_n", "V100-16GB", 8, ("nvlink", None, "published")),
    # Tencent HCC: RDMA cluster (the link inside from the form factor); GT4 NVSwitch.
    ("tencent", "HCCPNV5.28XLARGE1920", "H800-SXM-80GB", 8, ("nvlink", "rdma", "published")),
    ("tencent", "GT4.41XLARGE948", "A100-SXM-40GB", 8, ("nvswitch", None, "published")),
    # Alibaba and Huawei instance families.
    ("alibaba", "ecs.gn7-c13g1.26xlarge", "A100-SXM-40GB", 8, ("nvswitch", None, "published")),
    ("alibaba", "ecs.sccgn7ex.32xlarge", "A100-SXM-80GB", 8, ("nvlink", "rdma", "published")),
    ("huawei", "p2v.16xlarge.8", "V100-16GB", 8, ("nvlink", None, "published")),
])
def test_published_families(source, instance_type, gpu, count, expected):
    assert links(source, instance_type, gpu, count) == expected


@pytest.mark.parametrize(("source", "instance_type", "gpu", "count", "expected"), [
    # Marketplaces publish nothing per machine: SXM modules only exist on NVLink baseboards,
    # PCIe cards have no switch fabric, H100 NVL cards come as bridged pairs.
    ("runpod", "8x NVIDIA H100 80GB HBM3", "H100-SXM-80GB", 8, ("nvlink", None, "form factor")),
    ("vastai", "42:8xA100_SXM4", "A100-SXM-80GB", 8, ("nvlink", None, "form factor")),
    ("vastai", "43:8xRTX_4090", "RTX-4090", 8, ("pcie", None, "form factor")),
    ("runpod", "2x NVIDIA H100 NVL", "H100-NVL-94GB", 2, ("nvlink", None, "form factor")),
    ("runpod", "4x NVIDIA H100 NVL", "H100-NVL-94GB", 4, ("pcie", None, "form factor")),
    ("runpod", "8x AMD Instinct MI300X OAM", "MI300X", 8,
     ("infinity-fabric", None, "form factor")),
    ("autodl", "beijing-A:8x A800", "A800-SXM-80GB", 8, ("nvlink", None, "form factor")),
    # Unknown form factor (the catalog does not track V100 boards) and unknown GPUs: unknown.
    ("autodl", "x:4x V100", "V100-32GB", 4, (None, None, "unknown")),
    ("vastai", "44:2xMystery", "MYSTERY-GPU", 2, (None, None, "unknown")),
    # One GPU links to nothing.
    ("vastai", "45:1xH100_SXM", "H100-SXM-80GB", 1, (None, None, "unknown")),
])
def test_form_factor_fallback(source, instance_type, gpu, count, expected):
    assert links(source, instance_type, gpu, count) == expected


@pytest.mark.parametrize(("source", "instance_type", "gpu", "count", "expected"), [
    # Azure's 8-GPU HGX sizes without the "r" (Microsoft: InfiniBand drivers go on the "'r'
    # sizes"; ndh100v5-series / ndma100v4-series: NVLink inside the VM): NVSwitch, no
    # InfiniBand. They used to fall through to a catch-all row and read as PCIe boxes.
    ("azure", "Standard_ND96is_H100_v5", "H100-SXM-80GB", 8, ("nvswitch", None, "published")),
    ("azure", "Standard_ND96is_noIB_H100_v5", "H100-SXM-80GB", 8,
     ("nvswitch", None, "published")),
    ("azure", "Standard_ND96ams_A100_v4", "A100-SXM-80GB", 8, ("nvswitch", None, "published")),
    ("azure", "Standard_ND96is_MI300X_v5", "MI300X", 8, ("infinity-fabric", None, "published")),
    # Standard_NC24rs_v3 (ncv3-series): InfiniBand published, the V100 link is not.
    ("azure", "Standard_NC24rs_v3", "V100-16GB", 4, (None, "infiniband", "published")),
])
def test_azure_sizes_without_the_r_have_nvswitch_and_no_infiniband(source, instance_type, gpu,
                                                                   count, expected):
    assert links(source, instance_type, gpu, count) == expected


@pytest.mark.parametrize(("source", "instance_type", "gpu", "count", "expected"), [
    # A family no table row describes: the catalog's form factor decides, and says so...
    ("azure", "Standard_NC80adis_H100_v5", "H100-NVL-94GB", 2, ("nvlink", None, "form factor")),
    ("azure", "Standard_NC64as_T4_v3", "T4", 4, ("pcie", None, "form factor")),
    ("aws", "g7.24xlarge", "RTX-PRO-4500", 4, ("pcie", None, "form factor")),
    ("gcp", "g2-standard-96", "L4", 8, ("pcie", None, "form factor")),
    ("oci", "BM.GPU.L40S.4", "L40S", 4, ("pcie", None, "form factor")),
    ("alibaba", "ecs.gn7i-c32g1.32xlarge", "A10", 4, ("pcie", None, "form factor")),
    ("tencent", "GN7.20XLARGE320", "T4", 4, ("pcie", None, "form factor")),
    # ... or, where the catalog does not track the board either, it is unknown: never a
    # catch-all row's "pcie" (Azure's `_N[CVDPG]` row once called every ND size PCIe).
    ("azure", "Standard_ND40s_v9", "V100-32GB", 8, (None, None, "unknown")),
    ("azure", "Standard_NC24s_v3", "V100-16GB", 4, (None, None, "unknown")),
    ("huawei", "p2s.16xlarge.8", "V100-32GB", 4, (None, None, "unknown")),
    ("tencent", "PNV5b.48XLARGE", "MYSTERY-GPU", 8, (None, None, "unknown")),
    ("aws", "g9.48xlarge", "MYSTERY-GPU", 8, (None, None, "unknown")),
])
def test_a_family_no_table_describes_is_inferred_or_unknown(source, instance_type, gpu, count,
                                                            expected):
    assert links(source, instance_type, gpu, count) == expected


def test_no_interconnect_table_ends_in_a_catch_all_row():
    """Every row names a family: no pattern matches instance types of several unrelated
    families, such as any N-series size or any name at all."""
    from gpuradar.core.providers import PROVIDERS

    probes = ("Standard_NC8as_T4_v3", "Standard_NV36ads_A10_v5", "Standard_ND40s_v9", "x",
              "g9.48xlarge", "p9.48xlarge", "ecs.gn9i-c8g1.2xlarge", "PNV9.8XLARGE",
              "g9-standard-8", "BM.GPU.X99.8", "pi9.2xlarge.4")
    for provider in PROVIDERS:
        for fam in provider.interconnect:
            hits = [p for p in probes if fam.pattern.search(p)]
            assert not hits, (provider.name, fam.pattern.pattern, hits)


def test_fast_link_helpers_decide_what_sharding_may_use():
    p5 = interconnect_for("aws", "p5.48xlarge", "H100-SXM-80GB", 8)
    pcie = interconnect_for("vastai", "1:8xRTX_4090", "RTX-4090", 8)
    lambda_ = interconnect_for("lambda", "gpu_8x_h100_sxm5", "H100-SXM-80GB", 8)
    assert fast_intra(p5) and fast_inter(p5)
    assert not fast_intra(pcie) and not fast_inter(pcie)
    assert fast_intra(lambda_) and not fast_inter(lambda_)  # one machine only
    assert not fast_intra(None) and not fast_inter({})


def test_every_answer_names_its_basis_and_explains_itself():
    info = interconnect_for("azure", "Standard_ND96isr_H100_v5", "H100-SXM-80GB", 8)
    assert set(info) == {"intra_node", "inter_node", "basis", "note"}
    assert "InfiniBand" in info["note"]
