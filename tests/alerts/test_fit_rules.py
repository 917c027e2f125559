"""The recommend clause as an alert rule (`cheapest fit for 7B finetune under $3/h`): parsing
(readable and YAML forms, errors pointing at the word) and evaluation against offers in real
storage (SQLite and PostgreSQL) with the usual alert state and notifications."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from gpuradar.alerts.engine import evaluate, match_rules
from gpuradar.alerts.grammar import parse_fit_clause, parse_rule
from gpuradar.alerts.loader import parse_rules
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.rules import RuleError
from gpuradar.cli import app  # every command
from gpuradar.recommend import Job
from gpuradar.storage.offers import OfferRow
from gpuradar.storage.queries import store_fx
from tests.alerts.test_alert_engine import T0, crawl, offer, outbox, rule

CNY = 0.14  # USD per CNY, stored as the FX rate in these tests
H100, H800 = "H100-SXM-80GB", "H800-SXM-80GB"


def show(text: str) -> list[str]:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    return str(info.value).splitlines()


def caret(lines: list[str], text: str) -> str:
    """The word of `text` the caret line (lines[2]) marks."""
    assert lines[1] == f"    {text}"
    start = lines[2].index("^") - 4
    return text[start:start + lines[2].count("^")]


# -- parsing ------------------------------------------------------------------------------
def test_readable_fit_rules_parse_into_a_rule_with_the_job():
    r = parse_rule("cheapest fit for 7B finetune under $3/h")
    c = r.condition
    assert c.job == Job(7e9, "finetune")
    # The price is for the whole configuration the job needs, not per GPU.
    assert (c.max_price, c.currency, c.basis) == (3.0, "USD", "offer")
    assert (r.name, r.text) == ("cheapest-fit-for-7b-finetune-under-3",
                                "cheapest fit for 7B finetune under $3/h")
    assert r.reading().startswith("whole configuration for 7B finetune (bf16, seq 2048")

    r = parse_rule("cheapest fit for 70B lora under ¥100/h in mainland")
    c = r.condition
    assert (c.job.params, c.job.task) == (70e9, "lora")
    assert (c.max_price, c.currency, c.offers.regions) == (100.0, "CNY", ("mainland",))
    # `cn-*` is a plain glob, as in every other rule and command.
    assert parse_rule("cheapest fit for 70B lora under ¥100/h in cn-*"
                      ).condition.offers.regions == ("cn-*",)

    r = parse_rule("fit for 7B qlora spot under 2 USD/h per gpu on aws,vastai seq 4096",
                   notify=("team",), repeat="4h")
    c = r.condition
    assert (c.basis, c.offers.pricing, c.offers.sources, c.job.seq_len) == (
        "gpu", "spot", ("aws", "vastai"), 4096)
    assert (r.notify, r.repeat) == (("team",), timedelta(hours=4))


def test_the_clause_alone():
    clause = parse_fit_clause("cheapest fit for 7B finetune under $3/h")
    assert clause.job == Job(7e9, "finetune")
    assert (clause.max_price, clause.currency, clause.per_gpu, clause.pricing) == (
        3.0, "USD", False, None)
    clause = parse_fit_clause("fit for 70B qlora spot under ¥20/h per gpu on autodl,vastai "
                              "region cn-* seq 4096")
    assert clause.job.params == 70e9 and clause.job.task == "qlora"
    assert clause.job.seq_len == 4096
    assert (clause.max_price, clause.currency, clause.per_gpu) == (20.0, "CNY", True)
    assert clause.pricing == "spot" and clause.sources == ("autodl", "vastai")
    assert clause.regions == ("cn-*",)
    assert parse_fit_clause("fit for 13B lora under 14 CNY/h").currency == "CNY"
    # As in the GPU rules: `in` takes providers or regions, `less than` = `under`.
    clause = parse_fit_clause("fit for 13B lora less than 3 USD/h seq 4096 in eu-*")
    assert (clause.max_price, clause.job.seq_len, clause.regions, clause.sources) == (
        3.0, 4096, ("eu-*",), ())
    assert parse_fit_clause("fit for 13B lora in aws,gcp").sources == ("aws", "gcp")


def test_fit_rule_identity_ignores_spelling_and_leaves_other_rules_alone():
    a = parse_rule("cheapest fit for 7B finetune under $3/h")
    b = parse_rule("fit  for 7b fine-tune  below 3 USD/h")
    assert a.condition_hash() == b.condition_hash()
    assert a.condition_hash() != parse_rule("cheapest fit for 7B finetune under $4/h"
                                            ).condition_hash()
    assert a.condition_hash() != parse_rule("cheapest fit for 8B finetune under $3/h"
                                            ).condition_hash()
    # The hash of a GPU rule is what it was before fit rules existed (computed from the
    # previous alerts/rules.py): upgrading does not restart anyone's alerts.
    assert parse_rule("H100 under $2/h").condition_hash() == "8dfde82874ca01d1"


@pytest.mark.parametrize(("text", "message", "word"), [
    ("cheapest fit for 7B finetne under $3/h", "unexpected word 'finetne'; did you mean "
                                               "finetune?", "finetne"),
    ("cheapest fit for 7B lora under $3/h on awz", "unknown provider 'awz'; did you mean aws?",
     "awz"),
    ("cheapest fit for 7B lora under three", "'three' is not a price, e.g. $3/h or ¥20/h",
     "three"),
    ("cheapest H100 under $2/h", "expected 'fit for <size> <task>'", "H100"),
    ("cheapest fits 7B lora under $3/h", "expected 'for' after 'fit'", "7B"),
])
def test_a_bad_clause_quotes_the_rule_and_points_at_the_word(text, message, word):
    lines = show(text)
    assert lines[0] == message
    assert caret(lines, text) == word


def test_a_fit_rule_needs_a_price_and_a_valid_job():
    lines = show("cheapest fit for 7B finetune")
    assert lines[0].startswith("a fit rule needs a price limit")
    assert lines[2] == "    " + " " * len("cheapest fit for 7B finetune") + "^"
    assert show("cheapest fit for 7B under $3/h")[0].startswith("missing the task")
    (first, quoted) = show("fit for 7B finetune int4 under $3/h")
    assert first.startswith("int4 is for inference") and quoted.strip().startswith("fit for")


def test_which_single_gpus_hold_a_7b_model_for_inference():
    """14 GB of bf16 weights + 1.1 GB of KV cache: not on a 10 GB card; on a 16 GB T4 only
    until the context grows (2.1 GB of KV cache at 4096 tokens)."""
    from gpuradar.alerts.market import Pool, PoolKey
    from gpuradar.core.currency import FxTable

    def price(text: str, gpu: str, usd: float = 0.85) -> float | None:
        pool = Pool(PoolKey.of(parse_rule(text).condition), None)
        row = OfferRow(1, "gcp", "us-central1", "", "g2-standard-8", "on_demand", gpu, 1, None,
                       None, None, usd, "USD", usd, usd, True, None, "")
        return pool.value(row, FxTable())

    rule = "cheapest fit for 7B inference under $1/h"
    assert price(rule, "L4") == 0.85 and price(rule, "T4") == 0.85
    assert price(rule, "RTX-3080") is None
    assert price("cheapest fit for 7B inference seq 4096 under $1/h", "T4") is None


def test_yaml_forms_equal_the_readable_form():
    readable = parse_rule("cheapest fit for 7B finetune under $3/h")
    by_fit = rule_from_mapping({"fit": "7B finetune", "under": "$3/h"})
    by_rule = rule_from_mapping({"rule": "cheapest fit for 7B finetune under $3/h",
                                 "name": "cheap-7b", "notify": ["team"]})
    assert readable.condition_hash() == by_fit.condition_hash() == by_rule.condition_hash()
    assert by_fit.text == "cheapest fit for 7B finetune under $3/h"
    assert (by_rule.name, by_rule.text, by_rule.notify) == (
        "cheap-7b", "cheapest fit for 7B finetune under $3/h", ("team",))
    # Structured fields refine the clause, as for GPU rules.
    r = rule_from_mapping({"fit": "70B lora seq 4096", "under": "¥20/GPU-h", "pricing": "spot",
                           "sources": ["autodl", "alibaba"], "regions": "mainland"})
    c = r.condition
    assert (c.max_price, c.currency, c.basis, c.offers.pricing, c.offers.sources) == (
        20.0, "CNY", "gpu", "spot", ("autodl", "alibaba"))
    assert (c.offers.regions, c.job.seq_len) == (("mainland",), 4096)
    assert r.text == ("cheapest fit for 70B lora spot under ¥20/GPU-h on autodl,alibaba "
                      "region mainland seq 4096")
    # The readable form of a structured rule parses back to the same rule.
    assert parse_rule(r.text).condition_hash() == r.condition_hash()


def test_yaml_errors_point_into_the_field_and_name_the_entry():
    good, errors = parse_rules([
        ("rules.yaml: rule 1", {"fit": "7B finetne", "under": "$3/h"}),
        ("rules.yaml: rule 2", {"fit": "7B finetune"}),
        ("rules.yaml: rule 3", {"fit": "7B finetune", "under": "$3/h", "gpu": "H100"}),
        ("rules.yaml: rule 4", "cheapest fit for 7B finetune under $3/h on awz"),
        ("rules.yaml: rule 5", {"fit": "7B finetune", "under": "$3/h"}),
    ])
    assert [r.name for r in good] == ["cheapest-fit-for-7b-finetune-under-3"]
    lines = str(errors[0]).splitlines()
    assert lines == ["rules.yaml: rule 1: fit: unexpected word 'finetne'; did you mean "
                     "finetune?", "    7B finetne", "       ^^^^^^^"]
    assert "no price limit" in str(errors[1])
    assert "gpu: does not apply to a fit rule" in str(errors[2])
    assert str(errors[3]).splitlines()[0] == ("rules.yaml: rule 4: unknown provider 'awz'; "
                                              "did you mean aws?")
    assert caret(str(errors[3]).splitlines(), "cheapest fit for 7B finetune under $3/h on awz"
                 ) == "awz"


def test_a_yaml_fit_error_past_the_last_word_points_just_after_it():
    _, (error,) = parse_rules([("rules.yaml: rule 1", {"fit": "7B inference seq",
                                                       "under": "$3/h"})])
    assert str(error).splitlines() == [
        "rules.yaml: rule 1: fit: 'seq' needs a positive whole number",
        "    7B inference seq", "                    ^"]


def test_a_yaml_fit_error_on_its_first_word_points_at_that_word():
    _, (error,) = parse_rules([("rules.yaml: rule 1", {"fit": "huge finetune",
                                                       "under": "$3/h"})])
    assert str(error).splitlines() == [
        "rules.yaml: rule 1: fit: unexpected word 'huge'", "    huge finetune", "    ^^^^"]


# -- evaluation against stored offers ---------------------------------------------------------
def usd_market(engine, *, at: datetime = T0, two_gpu_price: float = 5.38) -> None:
    """7B finetune needs 121 GB (16 bytes/param + activations): two 80 GB GPUs, sharded."""
    crawl(engine, [
        # Fits: two NVLinked H100s for $5.38/h.
        offer("2x NVIDIA H100 80GB HBM3", two_gpu_price / 2, source="runpod", region="secure",
              gpu=H100, count=2, at=at),
        # Cheaper, but one 80 GB GPU cannot hold the model, and two single-GPU machines have
        # no GPU fabric between them.
        offer("1x NVIDIA H100 80GB HBM3", 2.69, source="runpod", region="secure", gpu=H100,
              count=1, at=at),
    ], source="runpod", at=at)
    crawl(engine, [
        # Fits (NVSwitch), but $23.92/h for the machine: above a $6 limit.
        offer("gpu_8x_h100_sxm5", 2.99, source="lambda", gpu=H100, count=8, at=at),
    ], source="lambda", at=at)
    crawl(engine, [
        # Far cheaper, but a 10 GB card: 209 of them, one per machine.
        offer("1:1xRTX_3080", 0.05, source="vastai", region="US", gpu="RTX-3080", count=1,
              at=at),
    ], source="vastai", at=at)


def matched(engine, text: str, now: datetime = T0) -> list[tuple[str, float]]:
    (m,) = match_rules(engine, [rule(text)], now=now)
    return [(o[4], round(v, 4)) for v, o in m.matches]


def test_fit_rule_matches_only_configurations_that_fit_under_the_limit(engine):
    usd_market(engine)
    assert matched(engine, "cheapest fit for 7B finetune under $6/h") == [
        ("2x NVIDIA H100 80GB HBM3", 5.38)]
    # Under is strict, and the price is the configuration's, not per GPU.
    assert matched(engine, "cheapest fit for 7B finetune under $5.38/h") == []
    assert matched(engine, "cheapest fit for 7B finetune under $25/h") == [
        ("2x NVIDIA H100 80GB HBM3", 5.38), ("gpu_8x_h100_sxm5", 23.92)]
    # Per GPU-hour when the rule says so: $2.69 and $2.99 per GPU.
    assert matched(engine, "cheapest fit for 7B finetune under $3/h per gpu") == [
        ("2x NVIDIA H100 80GB HBM3", 2.69), ("gpu_8x_h100_sxm5", 2.99)]
    # QLoRA (4.9 GB) fits the 10 GB card and the single H100; the 2x H100 is over $3.
    assert matched(engine, "cheapest fit for 7B qlora under $3/h on runpod,vastai") == [
        ("1:1xRTX_3080", 0.05), ("1x NVIDIA H100 80GB HBM3", 2.69)]
    assert matched(engine, "cheapest fit for 7B finetune under $100/h on vastai") == []


def test_fit_rule_fires_notifies_and_resolves_like_any_rule(engine):
    usd_market(engine)
    rules = [rule("cheapest fit for 7B finetune under $6/h", send_resolved=True)]
    first = evaluate(engine, rules, now=T0)
    assert (first.firing, first.notifications, first.fired) == (
        1, 1, ["cheapest-fit-for-7b-finetune-under-6"])
    (note,) = outbox(engine)
    assert note["title"] == "cheapest fit for 7B finetune under $6/h — 1 offer from $5.3800/h"
    body = note["body_markdown"]
    assert "fits the job: **$5.3800/h for 2 GPUs on 1 machine**" in body
    assert "gpu_8x_h100_sxm5" not in body and "RTX_3080" not in body
    assert "fits the job: $5.3800/h for 2 GPUs on 1 machine" in note["body_text"]
    assert "fits the job: <b>$5.3800/h for 2 GPUs on 1 machine</b>" in note["body_html"]
    # Nothing new while it keeps holding; within the hysteresis band it keeps firing.
    t1 = T0 + timedelta(hours=1)
    usd_market(engine, at=t1, two_gpu_price=6.05)               # < $6 + 2 %
    again = evaluate(engine, rules, now=t1)
    assert (again.firing, again.notifications, again.resolved) == (1, 0, [])
    # Clearly above: resolved, with the cheapest configuration now.
    t2 = T0 + timedelta(hours=2)
    usd_market(engine, at=t2, two_gpu_price=6.50)
    done = evaluate(engine, rules, now=t2)
    assert done.resolved == ["cheapest-fit-for-7b-finetune-under-6"]
    assert outbox(engine)[-1]["title"] == ("RESOLVED: cheapest fit for 7B finetune under $6/h "
                                          "— cheapest now $6.5000/h")


def test_a_stale_source_cannot_make_a_fit_rule_fire(engine):
    usd_market(engine)
    for n in range(1, 4):                               # runpod's crawls fail from now on
        crawl(engine, [], source="runpod", at=T0 + timedelta(hours=n), status="failed")
    result = evaluate(engine, [rule("cheapest fit for 7B finetune under $6/h")],
                      now=T0 + timedelta(hours=4))
    assert result.firing == 0 and result.stale_sources == ["runpod"]


def cny_market(engine) -> None:
    """70B LoRA: 140 GB of frozen bf16 weights + 46 GB of activations per GPU (no
    checkpointing): five 80 GB GPUs, sharded; nothing with 24 GB can hold it."""
    store_fx(engine, {"CNY": CNY}, date(2026, 11, 1))
    crawl(engine, [
        offer("HCCPNV5.28XLARGE1920", 90 / 8, source="tencent", region="ap-beijing", gpu=H800,
              currency="CNY", usd_rate=CNY),                                   # ¥90: fits
        offer("HCCPNV5.28XLARGE1920", 260 / 8, source="tencent", region="ap-shanghai",
              gpu=H800, currency="CNY", usd_rate=CNY),                         # ¥260: over
    ], source="tencent")
    crawl(engine, [
        offer("beijing-A:1x RTX 4090", 1.98, source="autodl", region="beijing-A",
              gpu="RTX-4090", count=1, currency="CNY", usd_rate=CNY),          # cannot hold
    ], source="autodl")
    crawl(engine, [
        # Quoted in USD in a mainland region: $13.30 = ¥95 through the stored rate.
        offer("ecs.ebmgn8v.48xlarge", 13.30 / 8, source="alibaba", region="cn-beijing",
              gpu=H800),
    ], source="alibaba")
    crawl(engine, [
        offer("gpu_8x_h100_sxm5", 1.5, source="lambda", gpu=H100),  # $12 = ¥85.71, not China
    ], source="lambda")


def test_cny_fit_rule_compares_in_cny_and_keeps_to_the_mainland(engine):
    cny_market(engine)
    text = "cheapest fit for 70B lora under ¥100/h in mainland"
    assert matched(engine, text) == [("HCCPNV5.28XLARGE1920", 90.0),
                                     ("ecs.ebmgn8v.48xlarge", 95.0)]
    # Anywhere: Lambda's $12 is ¥85.71, the cheapest; still no 24 GB card.
    assert matched(engine, "cheapest fit for 70B lora under ¥100/h") == [
        ("gpu_8x_h100_sxm5", round(12 / CNY, 4)), ("HCCPNV5.28XLARGE1920", 90.0),
        ("ecs.ebmgn8v.48xlarge", 95.0)]
    assert matched(engine, "cheapest fit for 70B lora under ¥90/h in mainland") == []
    # `cn-*` is a glob: Alibaba's cn-beijing, not Tencent's ap-beijing.
    assert matched(engine, "cheapest fit for 70B lora under ¥100/h in cn-*") == [
        ("ecs.ebmgn8v.48xlarge", 95.0)]
    evaluate(engine, [rule(text)], now=T0)
    (note,) = outbox(engine)
    assert note["title"] == f"{text} — 2 offers from ¥90.00/h"
    assert "fits the job: **¥90.00/h for 8 GPUs on 1 machine (the job needs 5)**" in (
        note["body_markdown"])
    assert "(quoted $13.30/h)" in note["body_markdown"]


def test_rules_test_command_handles_a_fit_rule(db_url):
    from gpuradar.storage.db import open_database

    engine = open_database(db_url)
    now = datetime.now(T0.tzinfo)
    usd_market(engine, at=now)
    runner = CliRunner()
    result = runner.invoke(app, ["rules", "test", "cheapest fit for 7B finetune under $6/h",
                                 "--database-url", db_url])
    assert result.exit_code == 0, result.output
    assert "would fire: 1 offer from $5.3800/h" in result.output
    as_json = runner.invoke(app, ["rules", "test", "cheapest fit for 7B finetune under $25/h",
                                  "--json", "--database-url", db_url])
    (only,) = json.loads(as_json.stdout)
    assert [(o["instance_type"], o["value"], o["configuration"]["gpus_needed"])
            for o in only["offers"]] == [("2x NVIDIA H100 80GB HBM3", 5.38, 2),
                                         ("gpu_8x_h100_sxm5", pytest.approx(23.92), 2)]
    bad = runner.invoke(app, ["rules", "test", "cheapest fit for 7B finetne under $6/h",
                              "--database-url", db_url])
    assert bad.exit_code == 2 and "did you mean finetune?" in " ".join(bad.output.split())


def test_rules_check_command_accepts_and_refuses_fit_rules(tmp_path):
    good = tmp_path / "rules.yaml"
    good.write_text("rules:\n  - cheapest fit for 7B finetune under $3/h\n"
                    "  - {name: cn-70b, fit: 70B lora, under: ¥100/h, regions: mainland}\n",
                    encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["rules", "check", str(good)], env={"GPURADAR_CONFIG": ""})
    assert result.exit_code == 0, result.output
    assert "2 rules OK" in result.output and "cn-70b" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - cheapest fit for 7B finetne under $3/h\n", encoding="utf-8")
    result = runner.invoke(app, ["rules", "check", str(bad)], env={"GPURADAR_CONFIG": ""})
    assert result.exit_code == 1
    assert ("    cheapest fit for 7B finetne under $3/h\n"
            "                        ^^^^^^^") in result.output


def test_a_fit_rule_per_instance_or_configuration_prices_the_whole_configuration():
    for per in ("instance", "config", "configuration"):
        r = parse_rule(f"cheapest fit for 7B finetune under $3/h per {per}")
        assert (r.condition.basis, r.describe()) == (
            "offer", "cheapest fit for 7B finetune under $3/h")
    lines = show("cheapest fit for 7B finetune under $3/h per banana")
    assert lines[0] == "expected 'per gpu'"
    assert caret(lines, "cheapest fit for 7B finetune under $3/h per banana") == "banana"


def test_fit_clause_batch_and_region_words():
    assert parse_fit_clause("fit for 7B lora batch 4").job.batch == 4
    with pytest.raises(RuleError, match="'region' needs a glob"):
        parse_fit_clause("fit for 7B lora region")


def test_fit_clause_bare_number_price_is_usd_and_leaves_the_next_word():
    clause = parse_fit_clause("fit for 7B lora under 3 spot")
    assert (clause.max_price, clause.currency, clause.pricing) == (3.0, "USD", "spot")
    assert parse_fit_clause("fit for 7B lora under 3").max_price == 3.0


def test_a_fit_rule_naming_the_default_precision_reads_and_is_named_as_one_that_does_not():
    """bf16 is the default precision: writing it changes neither the rule's text nor the
    name derived from it."""
    named = rule_from_mapping({"fit": "7B finetune bf16", "under": "$3/h"})
    plain = rule_from_mapping({"fit": "7B finetune", "under": "$3/h"})
    assert (named.text, named.name) == (plain.text, plain.name)
    assert named.condition.job.precision == "bf16"


def test_a_structured_fit_rule_with_a_batch_is_described_with_it():
    r = rule_from_mapping({"fit": "7B lora batch 4", "under": "$3/h"})
    assert (r.condition.job.batch, r.text) == (4, "cheapest fit for 7B lora under $3/h batch 4")
    assert parse_rule(r.text).condition_hash() == r.condition_hash()
