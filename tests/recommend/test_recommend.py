"""`gpuradar recommend`: memory estimates against published figures, fitting and ranking on a
fixed market in real storage (SQLite and PostgreSQL), interconnect filtering, CNY budgets,
data location, the rule clause, and the command as users run it."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from gpuradar import recommend as rc
from gpuradar.core import gpus
from gpuradar.core.currency import FxTable
from gpuradar.core.items import PriceItem
from gpuradar.storage import queries
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.offers import OfferRow, live_offers, with_observed_at
from tests.clirun import gpuradar, gpuradar_json
from tests.helpers import FIXTURES

GB = 1e9
CNY = 0.14  # USD per CNY stored as the ECB-derived rate in these tests


# -- memory estimates against published figures --------------------------------------------
def test_full_finetune_model_states_match_the_zero_paper():
    # ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054) §3.1: mixed-precision Adam needs
    # 2Ψ + 2Ψ + 12Ψ = 16Ψ bytes; "GPT-2 with 1.5B parameters ... requires at least 24 GB".
    est = rc.estimate_memory(rc.Job(1.5e9, "finetune"))
    states = est.parts["weights"] + est.parts["gradients"] + est.parts["optimizer"]
    assert states == pytest.approx(24.0)
    # ZeRO Figure 1: a 7.5B model, baseline data parallelism, 120 GB of model states per GPU.
    est = rc.estimate_memory(rc.Job(7.5e9, "pretrain"))
    assert est.shardable_gb == pytest.approx(120.0)
    # ... and ZeRO-3 across 64 GPUs: 1.9 GB each (Figure 1, Pos+g+p).
    assert est.shardable_gb / 64 == pytest.approx(1.875)


def test_full_finetune_of_7b_needs_112_gb_plus_activations():
    # 16 bytes/param × 7B = 112 GB (ZeRO accounting) + activations. Activations: Korthikanti
    # et al. 2022 (arXiv:2205.05198) eq. 1, 34·s·b·h bytes per layer with flash attention
    # (no s² term): Llama-7B shape (32 layers, h = 4096), s = 2048, b = 1 -> 9.13 GB.
    est = rc.estimate_memory(rc.Job(7e9, "finetune"))
    assert est.shardable_gb == pytest.approx(112.0)
    assert est.parts["activations"] == pytest.approx(34 * 2048 * 4096 * 32 / GB)
    assert est.total_gb == pytest.approx(121.13, abs=0.01)
    assert est.gpus_needed(80) == 2 and est.gpus_needed(141) == 1 and est.gpus_needed(24) == 8
    # Full recomputation keeps 2·s·b·h per layer (same paper, §4): ~17x less here.
    ckpt = rc.estimate_memory(rc.Job(7e9, "finetune", grad_checkpointing=True))
    assert ckpt.parts["activations"] < est.parts["activations"] / 10


def test_qlora_65b_fits_one_48gb_gpu_as_the_qlora_paper_reports():
    # QLoRA (Dettmers et al. 2023, arXiv:2305.14314), abstract: finetuning a 65B model on a
    # single 48 GB GPU; regular 16-bit finetuning of LLaMA 65B needs more than 780 GB.
    qlora = rc.estimate_memory(rc.Job(65e9, "qlora"))
    assert qlora.gpus_needed(48) == 1
    assert qlora.gpus_needed(24) > 1
    assert rc.estimate_memory(rc.Job(65e9, "finetune")).total_gb > 780
    # The paper's Guanaco setup: LoRA r = 64 on every linear layer; at a 512-token context
    # it still fits one 48 GB card (NF4 = 4.127 bits/param with double quantization, §3).
    guanaco = rc.estimate_memory(rc.Job(65e9, "qlora", lora_rank=64, seq_len=512))
    assert guanaco.parts["weights"] == pytest.approx(65e9 * 4.127 / 8 / GB)
    assert guanaco.gpus_needed(48) == 1


def test_lora_adapter_count_matches_peft_for_llama2_7b():
    # PEFT's print_trainable_parameters for Llama-2-7B, r = 16 on q,k,v,o,gate,up,down:
    # 39,976,960 trainable parameters (= 32 layers × 16 × (4·8192 + 3·15104)).
    job = rc.Job(7e9, "lora", lora_rank=16)
    shape = rc.model_shape(7e9)
    assert (shape.layers, shape.hidden) == (32, 4096)
    assert rc.lora_params(job, shape) == pytest.approx(39_976_960, rel=0.01)


def test_lora_on_gpt3_matches_the_lora_paper():
    # LoRA (Hu et al. 2021, arXiv:2106.09685) §4.2: on GPT-3 175B, LoRA (r = 4) cuts training
    # VRAM from 1.2 TB to 350 GB: the frozen 16-bit weights (2 bytes × 175B) dominate.
    est = rc.estimate_memory(rc.Job(175e9, "lora", lora_rank=4, grad_checkpointing=True))
    assert est.parts["weights"] == pytest.approx(350.0)
    assert est.total_gb == pytest.approx(350, rel=0.05)
    assert rc.estimate_memory(rc.Job(175e9, "finetune")).total_gb > 1200


def test_inference_memory_is_weights_plus_kv_cache():
    # Hugging Face "Optimizing LLMs for Speed and Memory": bf16 weights take ~2 × X GB for X
    # billion parameters ("Llama-2-70b ... 2 * 70 = 140 GB").
    est = rc.estimate_memory(rc.Job(70e9, "inference"))
    assert est.parts["weights"] == pytest.approx(140.0)
    assert est.gpus_needed(80) == 2
    # NVIDIA "Mastering LLM Techniques: Inference Optimization": Llama 2 7B, 16-bit, batch 1,
    # 4096 tokens: KV cache = 1 × 4096 × 2 × 32 × 4096 × 2 bytes ≈ 2 GB.
    kv = rc.estimate_memory(rc.Job(7e9, "inference", seq_len=4096)).parts["kv_cache"]
    assert kv == pytest.approx(4096 * 2 * 32 * 4096 * 2 / GB)
    # Weight-only int4 (group size 128): a quarter of bf16 plus the scales.
    int4 = rc.estimate_memory(rc.Job(70e9, "inference", precision="int4"))
    assert int4.parts["weights"] == pytest.approx(70e9 * 4.25 / 8 / GB)
    assert int4.gpus_needed(48) == 1


def test_compute_and_wall_time_from_published_tflops():
    # 6·N·tokens for training (Kaplan et al. 2020 §2.1); H100 SXM dense BF16 989.5 TFLOPS.
    est = rc.estimate_memory(rc.Job(7e9, "finetune", tokens=2e9))
    assert est.flops == pytest.approx(6 * 7e9 * 2e9)
    assert rc.estimate_memory(rc.Job(7e9, "inference", tokens=1e9)).flops == pytest.approx(
        2 * 7e9 * 1e9)
    assert rc.estimate_memory(rc.Job(7e9, "lora", tokens=1e9)).flops == pytest.approx(
        4 * 7e9 * 1e9)
    fit, _ = rc.fit_offer(row("aws", "p5.48xlarge", "H100-SXM-80GB", 8, 55.04), est)
    assert fit.wall_hours == pytest.approx(8.4e19 / (8 * 989.5e12 * 0.4) / 3600)
    assert fit.total_usd == pytest.approx(fit.wall_hours * 55.04)


@pytest.mark.parametrize(("text", "expected"), [
    ("7B", 7e9), ("70b", 70e9), ("1.5B", 1.5e9), ("350M", 350e6), ("2T", 2e12), ("7e9", 7e9)])
def test_sizes_parse(text, expected):
    assert rc.parse_count(text) == expected


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(rc.RecommendError, match="needs a unit"):
        rc.parse_count("7")
    with pytest.raises(rc.RecommendError, match="did you mean finetune"):
        rc.Job(7e9, "finetne")
    with pytest.raises(rc.RecommendError, match="int4 is for inference"):
        rc.Job(7e9, "finetune", precision="int4")
    with pytest.raises(rc.RecommendError, match="not both"):
        rc.Job(7e9, "finetune", tokens=1e9, gpu_hours=10)


@pytest.mark.parametrize(("text", "budget"), [
    ("2/h", rc.Budget(2.0, "USD")), ("$2/h", rc.Budget(2.0, "USD")), ("2", rc.Budget(2.0)),
    ("¥14/h", rc.Budget(14.0, "CNY")), ("14CNY/h", rc.Budget(14.0, "CNY")),
    ("14 cny/h", rc.Budget(14.0, "CNY")), ("$1.5/GPU-h", rc.Budget(1.5, "USD", True)),
    ("2 per gpu", rc.Budget(2.0, "USD", True))])
def test_budgets_parse(text, budget):
    assert rc.parse_budget(text) == budget


def test_budget_with_two_currencies_is_refused():
    with pytest.raises(rc.RecommendError, match="two currencies"):
        rc.parse_budget("$14CNY/h")


def row(source: str, instance: str, gpu: str, count: int, price: float, *,
        pricing: str = "on_demand", region: str = "r") -> OfferRow:
    """An offer as storage hands it to recommend (USD-quoted)."""
    return OfferRow(1, source, region, "", instance, pricing, gpu, count, None, None, None,
                    price, "USD", price, price / count, True, None, "", {}, None)


def test_bigger_configurations_that_cost_more_are_dropped_without_a_throughput_target():
    # One provider selling the same GPU one, two or eight at a time at one per-GPU price:
    # without --tokens/--gpu-hours, 2x and 8x only cost more.
    offers = [row("runpod", f"{n}x AMD Instinct MI300X OAM", "MI300X", n, 2.39 * n)
              for n in (1, 2, 8)] + [row("lambda", "gpu_8x_h100_sxm5", "H100-SXM-80GB", 8,
                                         23.92)]
    rec = rc.recommend(offers, rc.Job(7e9, "finetune"), rc.Options(max_age=None), FxTable(),
                       datetime.now(UTC))
    assert [(f.offer.source, f.gpus) for f in rec.fits] == [("runpod", 1), ("lambda", 8)]
    assert rec.excluded[rc.DOMINATED] == 2
    # With a job size, eight GPUs finish eight times sooner for the same total: now the
    # smaller ones are never better.
    sized = rc.recommend(offers, rc.Job(7e9, "finetune", tokens=2e9),
                         rc.Options(max_age=None), FxTable(), datetime.now(UTC))
    assert [f.gpus for f in sized.fits if f.offer.source == "runpod"] == [8]
    assert sized.excluded[rc.DOMINATED_SIZED] == 2
    # A cheaper per-GPU price for the single GPU makes it the cheaper, slower choice: both.
    cheap = [offers[0]._replace(price=2.0, price_usd=2.0, price_per_gpu_usd=2.0), *offers[1:]]
    both = rc.recommend(cheap, rc.Job(7e9, "finetune", tokens=2e9),
                        rc.Options(max_age=None), FxTable(), datetime.now(UTC))
    assert sorted(f.gpus for f in both.fits if f.offer.source == "runpod") == [1, 8]


def test_qlora_on_gpus_without_cuda_says_what_it_needs():
    offers = [row("runpod", "1x AMD Instinct MI300X OAM", "MI300X", 1, 2.39),
              row("huawei", "ascend-snt9b", "ASCEND-910B", 1, 3.10),
              row("runpod", "1x NVIDIA H100 80GB HBM3", "H100-SXM-80GB", 1, 2.69)]
    rec = rc.recommend(offers, rc.Job(7e9, "qlora"), rc.Options(max_age=None), FxTable(),
                       datetime.now(UTC))
    notes = {f.offer.gpu: f.flags for f in rec.fits}
    assert notes["H100-SXM-80GB"] == []
    assert any("bitsandbytes" in n and "ROCm" in n for n in notes["MI300X"])
    # bitsandbytes has no CANN build: Ascend is never proposed for QLoRA, and said why
    assert "ASCEND-910B" not in notes
    assert rec.excluded == {
        "on an accelerator without CUDA or ROCm, which qlora needs (--framework)": 1}
    assert any("bitsandbytes" in w for w in rec.warnings)
    # Full finetuning needs no bitsandbytes: no such note.
    plain = rc.recommend(offers, rc.Job(7e9, "finetune"), rc.Options(max_age=None), FxTable(),
                         datetime.now(UTC))
    assert not any("bitsandbytes" in n for f in plain.fits for n in f.flags)


def test_tpus_and_trainium_only_for_the_frameworks_that_run_on_them():
    offers = [row("gcp", "v5litepod-8", "TPU-V5E", 8, 9.6),
              row("aws", "trn1.32xlarge", "TRAINIUM", 16, 21.5),
              row("aws", "inf2.xlarge", "INFERENTIA2", 1, 0.76),
              row("runpod", "1x NVIDIA H100 80GB HBM3", "H100-SXM-80GB", 1, 2.69)]
    now = datetime.now(UTC)

    def shown(job: rc.Job, **opts) -> set[str]:
        rec = rc.recommend(offers, job, rc.Options(max_age=None, **opts), FxTable(), now)
        return {f.offer.gpu for f in rec.fits}

    # PyTorch on GPUs (the default): no TPU, no Trainium, no inference chip for training
    assert shown(rc.Job(7e9, "lora")) == {"H100-SXM-80GB"}
    # --framework adds: jax runs on CUDA and ROCm GPUs and TPUs; neuron adds Trainium (and
    # Inferentia, for inference only); --only keeps exactly the named framework's stacks.
    jax = rc.framework_stacks(["jax"])
    assert shown(rc.Job(7e9, "lora"), frameworks=jax) == {"TPU-V5E", "H100-SXM-80GB"}
    assert shown(rc.Job(7e9, "lora"), frameworks=rc.framework_stacks(["neuron"])) == {
        "TRAINIUM", "H100-SXM-80GB"}
    assert shown(rc.Job(7e9, "lora"),
                 frameworks=rc.framework_stacks(["neuron"], only=True)) == {"TRAINIUM"}
    assert shown(rc.Job(7e9, "lora"),
                 frameworks=rc.framework_stacks(["xla"], only=True)) == {"TPU-V5E"}
    assert "INFERENTIA2" in shown(rc.Job(7e9, "inference"),
                                  frameworks=rc.framework_stacks(["neuron"]))
    # a CUDA-only method is never proposed on them, whatever the framework
    assert shown(rc.Job(7e9, "qlora"), frameworks=("XLA/JAX", "Neuron", "CUDA")) == {
        "H100-SXM-80GB"}


def test_framework_option_names_the_known_stacks(engine):
    proc = gpuradar("recommend", "-p", "7B", "-t", "lora", "--framework", "tensorflow",
                    db_url=engine.url.render_as_string(hide_password=False))
    assert proc.returncode == 2
    assert "unknown framework 'tensorflow'; known: pytorch, jax, neuron, CUDA, ROCm" in (
        proc.stderr)


# -- real captures: the shipped recordings and the providers' real fixtures ----------------
RECORDED = Path(__file__).parents[2] / "gpuradar" / "recordings"
REAL = {  # each file's origin: its folder's provenance.json / SOURCE.md
    "lambda": [RECORDED / "lambda" / "0001-pricing.html"],
    "oci": sorted((RECORDED / "oci").glob("0*.json")),
    "vastai": [FIXTURES / "vastai" / "bundles_h100_sxm_real.json"],
    "gcp": [FIXTURES / "gcp" / "skus_tpu_real.json"],
    "aws": [FIXTURES / "aws" / "ondemand_real_us-east-1.json"],
    # the first machine is AutoDL's documented list item, verbatim (autodl/SOURCE.md)
    "autodl": [FIXTURES / "autodl" / "machine_list_page1.json"],
}


@pytest.fixture(scope="module")
def real() -> list[OfferRow]:
    """Every offer the spiders and the pipeline read from the real captures, as storage
    hands them to recommend."""
    from scrapy.settings import Settings

    import gpuradar.crawler.settings as project
    from gpuradar.crawler.parsing import parse_files

    settings = Settings()
    settings.setmodule(project)
    fx = FxTable({"CNY": (CNY, date.today(), "test")})
    rows = []
    for source, files in REAL.items():
        for r in parse_files(source, files, settings, fx=fx):
            if r.get("dropped") or not r.get("gpu") or r.get("price") is None:
                continue
            rows.append(OfferRow(len(rows) + 1, source, r["region"], r["zone"] or "",
                                 r["instance_type"], r["pricing"], r["gpu"], r["gpu_count"],
                                 r["gpu_memory_gb"], r["vcpus"], r["memory_gb"], r["price"],
                                 r["currency"], r["price_usd"], r["price_per_gpu_usd"],
                                 r["available"], r["available_count"], r["url"],
                                 r["attributes"], datetime.now(UTC)))
    return rows


def real_rec(rows: list[OfferRow], job: rc.Job, **options) -> rc.Recommendation:
    return rc.recommend(rows, job, rc.Options(max_age=None, top=0, **options),
                        FxTable({"CNY": (CNY, date.today(), "test")}), datetime.now(UTC))


def test_qlora_on_turing_and_volta_is_fp16_compute_named_never_bf16(real):
    # Lambda's real price list sells a Quadro RTX 6000 and 8x V100, AWS's real feed T4s: none
    # has bf16 (Turing and V100 whitepapers). QLoRA runs there only with the fallback named.
    rec = real_rec(real, rc.Job(7e9, "qlora"))
    by_gpu: dict[str, list[rc.Fit]] = {}
    for fit in rec.fits:
        by_gpu.setdefault(fit.offer.gpu, []).append(fit)
    for gpu in ("QUADRO-RTX-6000", "V100-16GB", "T4"):
        assert by_gpu[gpu], gpu
        for fit in by_gpu[gpu]:
            assert fit.precision == "fp16"
            assert f"fp16 compute: bf16 unsupported on {gpu}" in fit.flags
    for gpu in ("A10", "H100-SXM-80GB", "L4"):
        assert all(f.precision == "bf16" and not any("compute:" in x for x in f.flags)
                   for f in by_gpu[gpu]), gpu
    # No option computes in bf16 on a chip without it.
    assert not any(f.precision == "bf16"
                   and gpus.precision_support(f.offer.gpu, "bf16") is False for f in rec.fits)


def test_fp8_falls_back_to_bf16_then_fp16_and_says_so(real):
    rec = real_rec(real, rc.Job(7e9, "inference", precision="fp8"))
    fits = {f.offer.gpu: f for f in rec.fits}
    assert fits["H100-SXM-80GB"].precision == "fp8"
    assert fits["L4"].precision == "fp8"
    a10 = fits["A10"]
    assert a10.precision == "bf16" and "bf16 compute: fp8 unsupported on A10" in a10.flags
    # the fallback holds 16-bit weights: 14 GB for 7B, not fp8's 7 GB
    assert a10.per_gpu_gb > 14
    assert fits["QUADRO-RTX-6000"].precision == "fp16"
    assert "fp16 compute: fp8 unsupported on QUADRO-RTX-6000" in fits["QUADRO-RTX-6000"].flags


def test_framework_jax_adds_tpus_to_the_gpus(real):
    kinds = {gpus.CATALOG[f.offer.gpu].kind for f in real_rec(real, rc.Job(7e9, "lora")).fits}
    assert "TPU" not in kinds and "GPU" in kinds
    jax = real_rec(real, rc.Job(7e9, "lora"), frameworks=rc.framework_stacks(["jax"]))
    kinds = {gpus.CATALOG[f.offer.gpu].kind for f in jax.fits}
    assert {"GPU", "TPU"} <= kinds
    assert {f.offer.source for f in jax.fits if gpus.CATALOG[f.offer.gpu].kind == "TPU"} == {
        "gcp"}
    # AMD GPUs run JAX too (ROCm): the OCI MI300X stays with --only jax, Gaudi does not.
    only = real_rec(real, rc.Job(7e9, "lora"), frameworks=rc.framework_stacks(["jax"], True))
    assert "MI300X" in {f.offer.gpu for f in only.fits}
    assert "GAUDI-HL205" not in {f.offer.gpu for f in only.fits}
    neuron = real_rec(real, rc.Job(7e9, "lora"), frameworks=rc.framework_stacks(["neuron"]))
    assert "TRAINIUM" in {f.offer.gpu for f in neuron.fits}


def test_70b_pretrain_with_a_60_day_deadline_proposes_multi_node_rdma_plans(real):
    # 70B on 1T tokens: 5.6e23 FLOPs with recomputation; one 8x H100 node would take ~2 years.
    job = rc.Job(70e9, "pretrain", tokens=1e12, grad_checkpointing=True)
    rec = real_rec(real, job, deadline=timedelta(days=60), max_nodes=64)
    assert rec.fits
    totals = [f.total_usd for f in rec.fits]
    assert totals == sorted(totals)  # cheapest first
    for fit in rec.fits:
        assert fit.nodes > 1 and fit.wall_hours <= 60 * 24
        assert fit.rdma is True and fit.interconnect["inter_node"] in (
            "efa", "infiniband", "rdma", "gpudirect-tcpx", "gpudirect-tcpxo")
        assert fit.as_dict()["meets_deadline"] is True
        # the time is the compute at the catalog's rate, MFU and the fabric's efficiency
        expected = rc.estimate_memory(job).flops / (
            fit.gpus * fit.tflops * 1e12 * 0.4 * fit.efficiency) / 3600
        assert fit.wall_hours == pytest.approx(expected)
        assert fit.efficiency == pytest.approx(0.95 ** math.log2(fit.nodes))
        # the fewest machines that make it: one fewer misses the deadline
        fewer = fit.nodes - 1
        assert rc.estimate_memory(job).flops / (
            fewer * fit.offer.gpu_count * fit.tflops * 1e12 * 0.4 * 0.95 ** math.log2(fewer)
        ) / 3600 > 60 * 24 or fewer * fit.offer.gpu_count < fit.gpus_needed
    sources = {f.offer.source for f in rec.fits}
    assert {"aws", "oci"} <= sources  # p5/p4d EFA, OCI RDMA cluster networks
    # Lambda's 8x H100/B200 have no InfiniBand outside 1-Click Clusters (its pricing page):
    # never a multi-node plan.
    assert "lambda" not in sources
    assert sum(n for r, n in rec.excluded.items() if "InfiniBand/EFA/RDMA" in r) >= 2
    # A tighter deadline needs more machines of the same offer, at a higher total.
    tight = real_rec(real, job, deadline=timedelta(days=30), max_nodes=64)
    loose = {(f.offer.source, f.offer.instance_type): f for f in rec.fits}
    for fit in tight.fits:
        before = loose.get((fit.offer.source, fit.offer.instance_type))
        if before is not None:
            assert fit.nodes > before.nodes and fit.total_usd > before.total_usd


def test_a_deadline_needs_a_job_size(real):
    with pytest.raises(rc.RecommendError, match="--tokens or --gpu-hours"):
        real_rec(real, rc.Job(7e9, "lora"), deadline=timedelta(days=1))


def test_cuda_requirement_against_what_vast_and_autodl_state(real):
    # Vast.ai's real offers state cuda_max_good 12.2 and 13.0; AutoDL's documented machine
    # highest_cuda_version "12.2" (the others 12.4).
    vast = {o.attributes["cuda"] for o in real if o.source == "vastai"}
    assert vast == {12.2, 13.0}
    rec = real_rec(real, rc.Job(7e9, "qlora"), cuda="12.4")
    shown = {(f.offer.source, f.offer.attributes.get("cuda")) for f in rec.fits}
    assert ("vastai", 13.0) in shown and ("vastai", 12.2) not in shown
    assert ("autodl", "12.4") in shown and ("autodl", "12.2") not in shown
    assert rec.excluded["driver supports CUDA below 12.4 (--cuda)"] >= 2
    # Where the provider states nothing, the offer stays, flagged, never assumed.
    aws = [f for f in rec.fits if f.offer.source == "aws"]
    assert aws and all("highest CUDA not stated (needs 12.4)" in f.flags for f in aws)
    # CUDA code does not run on TPUs or Trainium.
    assert rec.excluded.get("on an accelerator without CUDA (--cuda)", 0) >= 0
    tpu = real_rec(real, rc.Job(7e9, "lora"), cuda="12.4",
                   frameworks=rc.framework_stacks(["jax"]))
    assert tpu.excluded["on an accelerator without CUDA (--cuda)"] >= 1
    assert not any(gpus.CATALOG[f.offer.gpu].kind == "TPU" for f in tpu.fits)
    with pytest.raises(rc.RecommendError, match="CUDA version"):
        rc.parse_cuda("twelve")


def test_region_overseas_and_mainland_split_the_real_market(real):
    mainland = real_rec(real, rc.Job(7e9, "qlora"), regions=("mainland",))
    assert {f.offer.source for f in mainland.fits} == {"autodl"}
    overseas = real_rec(real, rc.Job(7e9, "qlora"), regions=("overseas",))
    assert "autodl" not in {f.offer.source for f in overseas.fits}
    assert overseas.excluded["in mainland China (--region overseas)"] >= 1
    assert {"aws", "lambda", "vastai"} <= {f.offer.source for f in overseas.fits}
    us = real_rec(real, rc.Job(7e9, "qlora"), regions=("overseas", "us-*"))
    # us-* regions, and the prices that hold in every region (region `global`: OCI's list
    # price, Lambda's page), which are in us-* too (gpuradar.core.units.EVERYWHERE)
    assert {f.offer.source for f in us.fits if f.offer.region != "global"} <= {"aws", "gcp"}
    assert all(f.offer.region.startswith("us-") or f.offer.region == "global"
               for f in us.fits)


def test_spot_plan_time_carries_the_overhead_the_user_sets():
    spot = row("aws", "p5.48xlarge", "H100-SXM-80GB", 8, 20.0, pricing="spot")
    spot = spot._replace(attributes={"interruption": "<5%"})
    job = rc.Job(7e9, "finetune", tokens=2e9)
    plain = rc.fit_offer(spot, rc.estimate_memory(job))[0]
    heavy = rc.fit_offer(spot, rc.estimate_memory(job), spot_overhead=0.15)[0]
    assert heavy.wall_hours == pytest.approx(plain.wall_hours * 1.15)
    assert heavy.total_usd == pytest.approx(plain.total_usd * 1.15)
    assert rc.parse_share("15%") == rc.parse_share("0.15") == pytest.approx(0.15)
    with pytest.raises(rc.RecommendError):
        rc.parse_share("15")


# -- a fixed market in storage ------------------------------------------------------------
def _item(source, region, instance, gpu, count, price, *, currency="USD", pricing="on_demand",
          available=True, attributes=None) -> PriceItem:
    usd = price * (CNY if currency == "CNY" else 1.0)
    return PriceItem(source=source, region=region, instance_type=instance, pricing=pricing,
                     gpu=gpu, gpu_count=count, price=price, currency=currency,
                     available=available, attributes=attributes or {}, price_usd=usd,
                     price_per_gpu_usd=usd / count, observed_at=datetime.now(UTC))


H100, H800 = "H100-SXM-80GB", "H800-SXM-80GB"
MARKET = [
    _item("aws", "us-east-1", "p5.48xlarge", H100, 8, 55.04),
    _item("aws", "us-west-2", "p5.48xlarge", H100, 8, 55.04),
    _item("aws", "us-east-1", "p5.48xlarge", H100, 8, 20.00, pricing="spot",
          attributes={"interruption": ">20%", "savings_pct": 64}),
    _item("azure", "eastus", "Standard_ND96isr_H100_v5", H100, 8, 98.32),
    _item("runpod", "secure", "2x NVIDIA H100 80GB HBM3", H100, 2, 5.38),
    _item("runpod", "secure", "1x NVIDIA H100 80GB HBM3", H100, 1, 2.69),
    _item("vastai", "US", "1:8xRTX_4090", "RTX-4090", 8, 3.20),
    _item("vastai", "US", "2:8xA100_PCIE", "A100-PCIE-80GB", 8, 8.00),
    _item("vastai", "US", "3:1xRTX_4090", "RTX-4090", 1, 0.20, pricing="spot",
          attributes={"reliability": 0.90}),
    _item("lambda", "us-east-1", "gpu_1x_a6000", "RTX-A6000", 1, 0.80),
    _item("autodl", "beijing-A", "beijing-A:1x RTX 4090", "RTX-4090", 1, 1.98, currency="CNY"),
    _item("autodl", "beijing-B", "beijing-B:1x RTX 4090", "RTX-4090", 1, 14.00, currency="CNY"),
    _item("tencent", "ap-beijing", "HCCPNV5.28XLARGE1920", H800, 8, 260.00, currency="CNY"),
    _item("alibaba", "cn-hongkong", "ecs.gn7i-c8g1.2xlarge", "A10", 1, 10.00, currency="CNY"),
    _item("huawei", "cn-north-4", "p2s.2xlarge.8", "V100-32GB", 1, 12.00, currency="CNY"),
    _item("gcp", "us-central1", "a3-highgpu-8g", H100, 8, 88.49, available=False),
]
STALE = [_item("oci", "us-ashburn-1", "BM.GPU.H100.8", H100, 8, 80.00)]


def _store(engine) -> None:
    by_source: dict[str, list[PriceItem]] = {}
    for it in MARKET:
        by_source.setdefault(it.source, []).append(it)
    for source, items in by_source.items():
        writer = CrawlWriter(engine, source)
        writer.add(items)
        assert writer.finish("ok").status == "ok"
    writer = CrawlWriter(engine, "oci", started_at=datetime.now(UTC) - timedelta(days=5))
    writer.add(STALE)
    writer.finish("ok")
    queries.store_fx(engine, {"CNY": CNY, "EUR": 1.16}, date.today())


@pytest.fixture
def market(engine):
    _store(engine)
    return engine


def stored(engine) -> list[OfferRow]:
    """The offers as `gpuradar recommend` reads them."""
    return with_observed_at(live_offers(engine, include_unavailable=True,
                                        with_attributes=True), queries.last_success(engine))


def run(engine, job: rc.Job, **options) -> rc.Recommendation:
    fx = FxTable(queries.latest_fx(engine))
    return rc.recommend(stored(engine), job, rc.Options(**options), fx, datetime.now(UTC))


def picks(rec: rc.Recommendation) -> list[tuple[str, str, str]]:
    return [(f.offer.source, f.offer.instance_type, f.offer.pricing) for f in rec.fits]


SHARDING_OVER_PCIE = "sharding needs NVLink/NVSwitch; GPUs linked by PCIe"


def test_ranking_by_hourly_price_of_the_offers_that_fit(market):
    rec = run(market, rc.Job(7e9, "finetune"))  # 121 GB: two 80 GB GPUs, sharded
    assert picks(rec) == [
        ("runpod", "2x NVIDIA H100 80GB HBM3", "on_demand"),   # $5.38
        ("aws", "p5.48xlarge", "spot"),                       # $20.00
        ("tencent", "HCCPNV5.28XLARGE1920", "on_demand"),     # ¥260 = $36.40
        ("aws", "p5.48xlarge", "on_demand"),                  # $55.04, two regions
        ("azure", "Standard_ND96isr_H100_v5", "on_demand"),   # $98.32
    ]
    aws = rec.fits[3]
    assert aws.offer.region == "us-east-1" and aws.also_in == ["us-west-2"]
    assert rec.fits[0].gpus_needed == 2 and rec.fits[0].sharded
    assert rec.fits[0].per_gpu_gb == pytest.approx(112 / 2 + 34 * 2048 * 4096 * 32 / GB)
    assert rec.fits[2].hourly_usd == pytest.approx(260 * CNY)
    # What was left out, and why.
    assert rec.excluded[SHARDING_OVER_PCIE] == 2  # 8x RTX 4090, 8x A100 PCIe
    assert rec.excluded["unavailable"] == 1
    assert rec.excluded["stale (data older than --max-age)"] == 1
    # Several machines need a GPU fabric: where the provider states none, and where nobody
    # says (marketplace machines), neither is assumed.
    # (No table row states "no fabric" for these families: all are unknown, none assumed.)
    no_fabric = rec.excluded.get("needs several machines; no InfiniBand/EFA/RDMA between them",
                                 0)
    unknown = rec.excluded["needs several machines; fabric between them unknown"]
    assert unknown >= 1 and no_fabric + unknown >= 4


def test_sharded_training_never_picks_pcie_gpus_unless_asked(market):
    # 70B LoRA (frozen bf16 weights 140 GB) needs two 80 GB GPUs sharing the model: the
    # 8x A100 PCIe box holds it in memory but its GPUs only talk over PCIe.
    rec = run(market, rc.Job(70e9, "lora", grad_checkpointing=True))
    chosen = picks(rec)
    assert ("vastai", "2:8xA100_PCIE", "on_demand") not in chosen
    assert ("vastai", "1:8xRTX_4090", "on_demand") not in chosen
    assert all(f.interconnect["intra_node"] in ("nvlink", "nvswitch") for f in rec.fits)
    assert rec.excluded[SHARDING_OVER_PCIE] == 2
    # --any-interconnect shows them, flagged.
    loose = run(market, rc.Job(70e9, "lora", grad_checkpointing=True), any_interconnect=True)
    pcie = [f for f in loose.fits if f.offer.instance_type == "2:8xA100_PCIE"]
    assert pcie and "sharded over PCIe: slow" in pcie[0].flags


def test_full_70b_finetune_spans_machines_only_over_a_gpu_fabric(market):
    # 16 B/param × 70B = 1120 GB: 16 GPUs of 80 GB = two machines of eight, which needs
    # InfiniBand/EFA/RDMA between them (AWS P5 EFA, Azure ND H100 v5 InfiniBand, Tencent HCC).
    rec = run(market, rc.Job(70e9, "finetune", grad_checkpointing=True))
    assert sorted(picks(rec)) == [("aws", "p5.48xlarge", "on_demand"),
                                  ("aws", "p5.48xlarge", "spot"),
                                  ("azure", "Standard_ND96isr_H100_v5", "on_demand"),
                                  ("tencent", "HCCPNV5.28XLARGE1920", "on_demand")]
    assert {f.nodes for f in rec.fits} == {2}
    assert {f.interconnect["inter_node"] for f in rec.fits} == {"efa", "infiniband", "rdma"}
    spot = next(f for f in rec.fits if f.offer.pricing == "spot")
    assert spot.hourly_usd == pytest.approx(40.0)  # two machines
    assert any("2 spot machines" in w for w in spot.spot["warnings"])
    # Without activation checkpointing, 46 GB of activations per GPU: the output says so.
    heavy = run(market, rc.Job(70e9, "finetune"))
    assert any("--grad-checkpointing" in w for w in heavy.warnings)


def test_job_size_ranks_by_total_cost_and_wall_time(market):
    rec = run(market, rc.Job(7e9, "finetune", tokens=2e9), spot_overhead=0)
    # 8.4e19 FLOPs at 40 % of 989.5 TFLOPS: 7.4 h on eight H100s, 29.5 h on two.
    first, second = rec.fits[0], rec.fits[1]
    assert (first.offer.source, first.offer.pricing) == ("aws", "spot")
    assert first.wall_hours == pytest.approx(7.37, abs=0.01)
    assert first.total_usd == pytest.approx(147.4, abs=0.1)
    assert second.offer.source == "runpod"
    assert second.wall_hours == pytest.approx(29.48, abs=0.01)
    assert second.total_usd == pytest.approx(158.6, abs=0.1)
    totals = [f.total_usd for f in rec.fits]
    assert totals == sorted(totals)
    # The spot offer carries its interruption band.
    assert first.spot["signal"].startswith("interruption >20%")
    assert first.spot["risk"] == "high"
    assert first.spot["warnings"] == ["checkpoint at least hourly"]
    # Spot time carries an overhead for interruptions and checkpoints (default +10 %): the
    # spot offer's 8.1 h at $20/h ($162.2) is now dearer than RunPod's two H100s.
    default = run(market, rc.Job(7e9, "finetune", tokens=2e9))
    spot = next(f for f in default.fits if f.offer.pricing == "spot")
    assert spot.wall_hours == pytest.approx(7.37 * 1.1, abs=0.01)
    assert spot.total_usd == pytest.approx(162.2, abs=0.1)
    assert default.fits[0].offer.source == "runpod"
    assert "time includes +10% for interruptions and checkpoints (--spot-overhead)" in (
        spot.spot["warnings"])
    heavy = run(market, rc.Job(7e9, "finetune", tokens=2e9), spot_overhead=0.5)
    assert next(f for f in heavy.fits if f.offer.pricing == "spot").wall_hours == (
        pytest.approx(7.37 * 1.5, abs=0.01))
    # A job that cannot resume: spot is a bad idea for an 8 h run, says so, ranks last.
    strict = run(market, rc.Job(7e9, "finetune", tokens=2e9), resumable=False)
    assert strict.fits[0].offer.source == "runpod"
    last = strict.fits[-1]
    assert last.offer.pricing == "spot" and rc.bad_idea(last)
    assert "~8.1 h restarts from zero" in last.spot["warnings"][0]


def test_gpu_hours_give_cost_without_speed_adjustment(market):
    rec = run(market, rc.Job(7e9, "qlora", gpu_hours=10), spot="no", top=0)
    lambda_ = next(f for f in rec.fits if f.offer.source == "lambda")
    assert lambda_.wall_hours == 10 and lambda_.total_usd == pytest.approx(8.0)
    # Eight PCIe GPUs running data parallel keep 90 % of their rate (scaling.py's stated
    # assumption for PCIe): 10 GPU-hours take 10 / 8 / 0.9 h.
    eight = next(f for f in rec.fits if f.offer.instance_type == "1:8xRTX_4090")
    assert eight.efficiency == pytest.approx(0.9)
    assert eight.wall_hours == pytest.approx(10 / 8 / 0.9)
    assert eight.total_usd == pytest.approx(3.20 * 10 / 8 / 0.9)
    assert all(f.offer.pricing == "on_demand" for f in rec.fits)


def test_spot_signals_from_vast_reliability(market):
    rec = run(market, rc.Job(7e9, "qlora"), spot="only")
    vast = next(f for f in rec.fits if f.offer.source == "vastai")
    # read with the offer itself: its source, no date of its own
    assert vast.spot == {"signal": "host reliability score 0.90, not an interruption "
                         "rate (Vast.ai)", "risk": "high",
                         "source": "Vast.ai", "as_of": None,
                         "warnings": ["long run (a run of unknown length) on a frequently "
                                      "interrupted offer: checkpoint at least hourly, or use "
                                      "on-demand"]}
    assert {f.offer.pricing for f in rec.fits} == {"spot"}


def test_an_azure_eviction_band_is_shown_and_its_run_is_the_unknown_range(engine):
    """An Azure spot offer with Resource Graph's band: recommend names it with source and
    date, says the band has no period, and works the run out from no interruption to
    unbounded (with --deadline: from never to surely in time), beside on-demand."""
    band = {"interruption": "0-5", "interruption_source": "Azure Resource Graph",
            "interruption_as_of": "2026-12-06"}
    for source, items in (("azure", [_item("azure", "eastus", "Standard_NC24ads_A100_v4",
                                           "A100-PCIE-80GB", 1, 1.10, pricing="spot",
                                           attributes=band)]),
                          ("lambda", [_item("lambda", "us-east-1", "gpu_1x_a100",
                                            "A100-PCIE-80GB", 1, 1.29)])):
        writer = CrawlWriter(engine, source)
        writer.add(items)
        assert writer.finish("ok").status == "ok"
    rec = run(engine, rc.Job(7e9, "lora", tokens=2e9), deadline=timedelta(days=20))
    assert [f.offer.source for f in rec.fits] == ["azure", "lambda"], rec.excluded
    azure = rec.fits[0]
    assert azure.spot["signal"] == "interruption 0-5% (Azure Resource Graph, 2026-12-06)"
    assert azure.spot["risk"] == "unknown"
    assert ("Azure Resource Graph states no period for its band: not a rate, so the run "
            "ranges from no interruption to unbounded") in azure.spot["warnings"]
    spot_run = azure.spot["run"]
    assert spot_run["interruptions"] == [0.0, None] and spot_run["total_usd"][1] is None
    assert spot_run["p_deadline"] == [0.0, 1.0]
    assert spot_run["basis"].startswith("unknown signal")


def test_cny_budget_converts_through_the_stored_rate(market):
    # ¥14/h at 0.14 USD/CNY = $1.96/h for the whole configuration. CNY offers compare as
    # quoted (AutoDL's ¥14.00 is in), USD offers through the rate (RunPod's $2.69 = ¥19.2 is
    # out, Lambda's $0.80 = ¥5.7 is in).
    rec = run(market, rc.Job(7e9, "qlora"), budget=rc.parse_budget("¥14/h"), top=0)
    assert picks(rec) == [
        ("vastai", "3:1xRTX_4090", "spot"),                    # $0.20
        ("autodl", "beijing-A:1x RTX 4090", "on_demand"),      # ¥1.98
        ("lambda", "gpu_1x_a6000", "on_demand"),               # $0.80
        ("alibaba", "ecs.gn7i-c8g1.2xlarge", "on_demand"),     # ¥10
        ("huawei", "p2s.2xlarge.8", "on_demand"),              # ¥12
    ]
    # AutoDL's ¥14.00 4090 in beijing-B is within the budget, but never better than the same
    # card for ¥1.98 in beijing-A: dominated, counted, not listed.
    assert rec.excluded[rc.DOMINATED] == 1
    coded = run(market, rc.Job(7e9, "qlora"), budget=rc.parse_budget("14CNY/h"), top=0)
    assert picks(coded) == picks(rec)
    assert rec.excluded["over budget"] >= 5
    # The same money in USD selects the same offers.
    usd = run(market, rc.Job(7e9, "qlora"), budget=rc.parse_budget("$1.96/h"), top=0)
    assert picks(usd) == picks(rec)
    # A lower CNY budget drops the CNY offers above it, as quoted.
    low = run(market, rc.Job(7e9, "qlora"), budget=rc.parse_budget("¥11/h"), top=0)
    assert ("huawei", "p2s.2xlarge.8", "on_demand") not in picks(low)
    assert ("alibaba", "ecs.gn7i-c8g1.2xlarge", "on_demand") in picks(low)
    # The budget is inclusive: Alibaba's ¥10.00 is within ¥10/h.
    exact = run(market, rc.Job(7e9, "qlora"), budget=rc.parse_budget("¥10/h"), top=0)
    assert ("alibaba", "ecs.gn7i-c8g1.2xlarge", "on_demand") in picks(exact)


def test_region_mainland_keeps_to_mainland_providers_and_regions(market):
    rec = run(market, rc.Job(7e9, "qlora"), regions=("mainland",), top=0)
    assert sorted((f.offer.source, f.offer.region) for f in rec.fits) == [
        ("autodl", "beijing-A"), ("huawei", "cn-north-4"), ("tencent", "ap-beijing")]
    assert rec.excluded[rc.DOMINATED] == 1     # AutoDL's dearer 4090 in beijing-B
    # Alibaba's Hong Kong region is not mainland China.
    assert rec.excluded["outside mainland China"] >= 1
    # `cn-*` is a plain glob, as everywhere: Alibaba's cn-hongkong and Huawei's cn-north-4.
    glob = run(market, rc.Job(7e9, "qlora"), regions=("cn-*",), top=0)
    assert sorted((f.offer.source, f.offer.region) for f in glob.fits) == [
        ("alibaba", "cn-hongkong"), ("huawei", "cn-north-4")]
    us = run(market, rc.Job(7e9, "qlora"), regions=("us-*",), top=0)
    assert {f.offer.source for f in us.fits} == {"aws", "lambda"}


def test_provider_filter_and_top(market):
    rec = run(market, rc.Job(7e9, "qlora"), providers=("aws", "runpod"), top=2)
    assert len(rec.fits) == 2
    assert {f.offer.source for f in rec.fits} <= {"aws", "runpod"}


def test_nothing_fits_explains_why(market):
    rec = run(market, rc.Job(1e12, "pretrain"))
    assert rec.fits == []
    assert rec.warnings[-1].startswith("no live offer fits: ")
    assert "activations alone" in rec.warnings[-1]


# -- the command --------------------------------------------------------------------------
@pytest.fixture
def market_url(sqlite_url):
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    _store(engine)
    engine.dispose()
    return sqlite_url


def test_cli_json(market_url):
    out = gpuradar_json("recommend", "--params", "7B", "--task", "finetune", "--tokens", "2B",
                        "--spot-overhead", "0%", db_url=market_url)
    est = out["estimate"]
    assert est["total_gb"] == pytest.approx(121.13, abs=0.01)
    assert est["parts_gb"]["optimizer"] == 84.0
    assert any("12 B × N" in line for line in est["formula"])
    assert est["flops"] == pytest.approx(8.4e19) and est["mfu"] == 0.4
    first = out["options"][0]
    assert (first["rank"], first["source"], first["pricing"]) == (1, "aws", "spot")
    assert first["interconnect"]["intra_node"] == "nvswitch"
    assert first["spot"]["risk"] == "high"
    assert first["wall_hours"] == pytest.approx(7.37, abs=0.01)
    assert all(o["interconnect"]["intra_node"] != "pcie" for o in out["options"])
    assert out["excluded"][SHARDING_OVER_PCIE] == 2
    assert {r["gpu_memory_gb"]: r["gpus"] for r in out["hardware"]}[80] == 2


def test_cli_table_with_cny_budget_and_mainland_region(market_url):
    proc = gpuradar("recommend", "-p", "7B", "-t", "qlora", "--budget", "¥14/h", "--region",
                    "mainland", db_url=market_url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "weights = N × 4.127 bits" in out  # the formula is printed
    assert "activations" in out and "[per GPU]" in out
    assert "Budget: ¥14/h for the whole configuration (≈ $1.96" in out
    assert "beijing-A" in out and "cn-north-4" in out
    assert "cn-hongkong" not in out and "us-east-1" not in out
    assert "data location: mainland China only" in proc.stderr


def test_cli_deadline_plans_show_machines_rdma_and_scaling(market_url):
    # 7B on 2B tokens takes 7.4 h on one 8x H100 node; within 3 h it needs three machines,
    # which only the offers with a GPU fabric between them can give.
    proc = gpuradar("recommend", "-p", "7B", "-t", "finetune", "--tokens", "2B",
                    "--deadline", "3h", "--spot", "no", db_url=market_url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "plans that finish within 3.0 h, cheapest first" in out
    assert "Deadline: 3.0 h; plans of up to 64 machines" in out
    assert "x0.95 per doubling of machines over InfiniBand/EFA/RDMA" in out
    first = next(line for line in out.splitlines() if line.lstrip().startswith("1 "))
    assert "3 × 8x H800-SXM-80GB" in first and "rdma" in first  # Tencent HCC, ¥780/h
    assert "yes" in first and "92%" in first
    data = gpuradar_json("recommend", "-p", "7B", "-t", "finetune", "--tokens", "2B",
                         "--deadline", "3h", "--spot", "no", db_url=market_url)
    assert data["options"] and all(o["meets_deadline"] and o["rdma"] is True
                                   and o["nodes"] == 3 for o in data["options"])
    bad = gpuradar("recommend", "-p", "7B", "-t", "lora", "--deadline", "3h",
                   db_url=market_url)
    assert bad.returncode == 2 and "--deadline needs the job size" in bad.stderr


def test_cli_exit_codes(market_url):
    bad = gpuradar("recommend", "-p", "7", "-t", "finetune", db_url=market_url)
    assert bad.returncode == 2 and "needs a unit" in bad.stderr
    none = gpuradar("recommend", "-p", "1T", "-t", "pretrain", "--json", db_url=market_url)
    assert none.returncode == 1
    assert json.loads(none.stdout)["options"] == []


def test_an_unpublished_interconnect_is_shown_as_unknown(engine):
    """An Azure size no Microsoft page describes the links of (4x V100 in NCv3, a board the
    catalog does not track) is not a PCIe box: `recommend` says "unknown" and flags it."""
    from gpuradar.cli.recommend_cmd import _rows

    item = _item("azure", "eastus", "Standard_NC24s_v3", "V100-16GB", 4, 12.24)
    writer = CrawlWriter(engine, "azure")
    writer.add([item])
    assert writer.finish("ok").status == "ok"
    rec = run(engine, rc.Job(13e9, "inference"))
    [fit] = rec.fits
    assert fit.sharded and fit.interconnect["intra_node"] is None
    assert fit.interconnect["basis"] == "unknown"
    assert "sharded over unpublished links: use pipeline parallelism" in fit.flags
    [row] = _rows(rec, datetime.now(UTC))
    assert row["link"] == "unknown"


def test_a_stored_interconnect_from_an_older_table_does_not_outlive_its_correction(engine):
    """Offers stored while Azure's table still ended in a catch-all row carry
    attributes["interconnect"] = PCIe for the 8-GPU NVSwitch ND96is_H100_v5; an unchanged
    offer keeps that row, so `recommend` asks the corrected table instead."""
    stale = {"interconnect": {"intra_node": "pcie", "inter_node": None, "basis": "published"}}
    item = _item("azure", "eastus", "Standard_ND96is_H100_v5", H100, 8, 90.00,
                 attributes=stale)
    writer = CrawlWriter(engine, "azure")
    writer.add([item])
    assert writer.finish("ok").status == "ok"
    rec = run(engine, rc.Job(7e9, "finetune"))
    [fit] = rec.fits
    assert fit.interconnect["intra_node"] == "nvswitch"
    assert fit.interconnect["inter_node"] is None


def test_a_capacity_block_is_never_a_plan_and_is_counted_as_sold_by_reservation():
    # A 24 h block booked ahead is no machine to start now by the hour: even the cheapest
    # per GPU-hour is left out, and the reason is said.
    offers = [row("aws", "p5.48xlarge", "H100-SXM-80GB", 8, 39.33, pricing="capacity_block"),
              row("lambda", "gpu_8x_h100_sxm5", "H100-SXM-80GB", 8, 23.92 * 2)]
    rec = rc.recommend(offers, rc.Job(7e9, "finetune"), rc.Options(max_age=None), FxTable(),
                       datetime.now(UTC))
    assert [f.offer.source for f in rec.fits] == ["lambda"]
    assert rec.excluded["sold by reservation (capacity-block)"] == 1
