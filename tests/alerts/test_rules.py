"""The rule language (readable and YAML forms), its errors, and target validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.loader import load_rules, load_targets, parse_targets, redact
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.rules import RuleError
from gpuradar.core.config import Config, ConfigError, load_config
from gpuradar.core.units import parse_duration

H100 = frozenset({"H100-SXM-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"})


class Read:
    """A parsed rule's fields by name, whichever part of the model holds them."""

    def __init__(self, rule) -> None:
        self.rule = rule

    def __getattr__(self, name: str):
        for part in (self.rule.condition.offers, self.rule.condition, self.rule):
            if name in type(part).__dataclass_fields__:
                return getattr(part, name)
        if name == "per_instance":
            return self.rule.condition.per_offer
        raise AttributeError(name)


def read(text: str) -> Read:
    return Read(parse_rule(text))


def test_the_issue_examples():
    r = read("H100 under $2/h")
    assert (r.gpus, r.max_price, r.currency, r.per_instance) == (H100, 2.0, "USD", False)

    r = read("A100-80GB spot under 1.5 USD/h in aws,gcp")
    assert r.gpus == {"A100-SXM-80GB", "A100-PCIE-80GB"}
    assert (r.pricing, r.max_price, r.sources, r.regions) == ("spot", 1.5, ("aws", "gcp"), ())

    r = read("8x H100 under $25/h region us-*")
    assert (r.min_gpus, r.max_gpus, r.max_price, r.regions) == (8, 8, 25.0, ("us-*",))
    assert r.basis == "offer"               # a GPU count: the price is for the whole offer

    r = read("4090 under ¥2/h on autodl")
    assert (r.gpus, r.currency, r.max_price, r.sources) == ({"RTX-4090"}, "CNY", 2.0,
                                                             ("autodl",))

    r = read("any 80GB+ GPU under $1.50/h")
    assert (r.gpus, r.min_gpu_memory, r.max_price) == (None, 80.0, 1.5)

    r = read("H200 on-demand under $3/h not on vastai")
    assert (r.pricing, r.exclude_sources, r.sources) == ("on_demand", ("vastai",), ())

    r = read("L40S under $1/h available in eu-*")
    assert (r.gpus, r.available_only, r.regions) == ({"L40S"}, True, ("eu-*",))

    r = read("H100 drops 15% below its 7-day low")
    assert (r.drop_pct, r.drop_window, r.max_price) == (0.15, timedelta(days=7), None)


@pytest.mark.parametrize(("text", "field", "value"), [
    ("H100 under $20/h per instance", "per_instance", True),
    ("H100 under 25 USD/instance-h", "per_instance", True),
    ("H100 under $2.00/GPU-h", "per_instance", False),
    ("H100 under 2 CNY/h", "currency", "CNY"),
    ("H100 under 1.8 EUR/h", "currency", "EUR"),
    ("H100 under €1.8/h", "currency", "EUR"),
    ("H100 under 14 cny", "currency", "CNY"),
    ("RTX 4090 under ¥2/h", "gpus", frozenset({"RTX-4090"})),
    ("H100,H200 under $3/h", "gpus", H100 | {"H200-SXM-141GB", "H200-NVL-141GB"}),
    ("8xH100 under $25/h", "max_gpus", 8.0),
    ("4+x H100 under $2/h", "max_gpus", None),
    ("H100 4+ GPUs under $2/h", "min_gpus", 4.0),
    ("H100 under $3/h with 32+ vCPUs", "min_vcpus", 32.0),
    ("H100 under $3/h with 256GB+ RAM", "min_memory", 256.0),
    ("H100 under $3/h with 640GB+ total GPU memory", "min_total_gpu_memory", 640.0),
    ("H100 under $3/h with 1TB+ total GPU memory", "min_total_gpu_memory", 1024.0),
    ("H100 under $2/h in aws, gcp", "sources", ("aws", "gcp")),
    ("H100 under $2/h not in eu-*", "exclude_regions", ("eu-*",)),
    ("H100 under $2/h in us-east-1,us-west-2", "regions", ("us-east-1", "us-west-2")),
    ("H100 spot below $1/h", "pricing", "spot"),
    ("H100 less than $2/h", "max_price", 2.0),
    ("H100 available", "available_only", True),
    ("H100 drops 10% below its 24h low", "drop_window", timedelta(hours=24)),
])
def test_grammar_variants(text, field, value):
    assert getattr(read(text), field) == value


# -- the price basis ----------------------------------------------------------------------
@pytest.mark.parametrize(("text", "basis", "counts", "reading"), [
    ("H100 under $2/h", "gpu", (None, None),
     "per GPU-hour, H100, any GPU count, under $2.0000/GPU-h"),
    ("8x H100 under $25/h", "offer", (8, 8), "whole offer, exactly 8x H100, under $25.00/h"),
    ("8+x H100 under $25/h", "offer", (8, None), "whole offer, at least 8x H100, under $25.00/h"),
    ("at least 8x H100 under $25/h", "offer", (8, None),
     "whole offer, at least 8x H100, under $25.00/h"),
    ("8x H100 under $3/GPU-h", "gpu", (8, 8),
     "per GPU-hour, exactly 8x H100, under $3.0000/GPU-h"),
    ("8x H100 under $3/h per GPU", "gpu", (8, 8),
     "per GPU-hour, exactly 8x H100, under $3.0000/GPU-h"),
    ("H100 under $20/h per instance", "offer", (None, None),
     "whole offer, H100, any GPU count, under $20.00/h"),
    ("H100 under 20 USD/instance-h", "offer", (None, None),
     "whole offer, H100, any GPU count, under $20.00/h"),
    ("8x A100 spot under $10/h", "offer", (8, 8),
     "whole offer, exactly 8x A100, under $10.00/h; spot only"),
])
def test_the_price_basis_is_read_once_and_said_back(text, basis, counts, reading):
    r = read(text)
    assert (r.basis, (r.min_gpus, r.max_gpus)) == (basis, counts)
    assert r.rule.reading() == reading


@pytest.mark.parametrize(("data", "basis", "text"), [
    ({"gpu": "H100", "count": 8, "under": "$25/h"}, "offer",
     "8x H100 under $25/h per instance"),
    ({"gpu": "H100", "count": 8, "under": "$3/h", "basis": "gpu"}, "gpu",
     "8x H100 under $3/h per GPU"),
    ({"gpu": "H100", "under": "$20/h", "basis": "offer"}, "offer",
     "H100 under $20/h per instance"),
    ({"gpu": "H100", "under": "$2/h"}, "gpu", "H100 under $2/h"),
    ({"gpu": "H100", "min_gpus": 8, "under": "$25/h"}, "offer",
     "8+x H100 under $25/h per instance"),
    ({"rule": "8x H100 under $25/h", "basis": "gpu"}, "gpu", "8x H100 under $25/h per GPU"),
])
def test_the_yaml_basis_and_the_readable_form_agree(data, basis, text):
    r = rule_from_mapping(data)
    assert r.condition.basis == basis and r.text == text
    assert parse_rule(text).condition == r.condition


def test_two_bases_in_one_rule_are_refused():
    assert "contradicts" in show("H100 under $2/GPU-h per instance")
    assert "`at least` needs a GPU count" in show("at least H100 under $2/h")


def test_a_rule_keeps_its_alert_identity_unless_its_meaning_changed():
    """Stored alert state is keyed by the condition's digest: rules that mean what they
    meant keep it; those whose reading changed start afresh (README release notes)."""
    same = {"H100 under $2/h": "8dfde82874ca01d1",
            "8x H100 under $25/h per instance": "6a505fe6d841a3e2",
            "4090 under ¥2/h on autodl": "2ed81eedc50b374a",
            "H100 drops 15% below its 7-day low": "370fa92fe52ac818",
            "cheapest fit for 7B finetune under $3/h": "61be8afa410e16aa"}
    for text, digest in same.items():
        assert parse_rule(text).condition_hash() == digest, text
    # Per GPU-hour before, per offer now; `cn-*` meant mainland China in fit rules.
    changed = {"8x H100 under $25/h region us-*": "2a77ca9cfe90484a",
               "8x A100 spot under $10/h": "f3dc5db9e8ac2bf2",
               "cheapest fit for 70B lora under ¥100/h in cn-*": "30179dcb55e106c1"}
    for text, digest in changed.items():
        assert parse_rule(text).condition_hash() != digest, text


@pytest.mark.parametrize(("text", "options", "message"), [
    ("H100 drops 15% below its 999999-day low", {},
     "duration '999999d' is longer than the limit of 3660 days"),
    ("H100 under $2/h", {"repeat": "99999d"},
     "repeat: duration '99999d' is longer than the limit of 3660 days"),
    ("H100 under $2/h", {"for": "4000d"},
     "for: duration '4000d' is longer than the limit of 3660 days"),
])
def test_windows_and_durations_beyond_the_store_are_refused(text, options, message):
    with pytest.raises(RuleError) as info:
        parse_rule(text, **options)
    assert message in str(info.value)
    with pytest.raises(RuleError, match="longer than the limit of 3660 days"):
        rule_from_mapping({"gpu": "H100", "drop": {"percent": 15, "days": 999999}})


def show(text: str) -> str:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    return str(info.value)


def test_a_misspelt_gpu_points_at_the_word_and_suggests():
    message = show("H10O under $2/h")
    assert message == ("unknown GPU 'H10O'; did you mean H100?\n"
                       "    H10O under $2/h\n"
                       "    ^^^^")


def test_an_unknown_gpu_first_in_a_list_is_the_only_word_pointed_at():
    assert show("H90O,A800x under $2/h").splitlines()[1:] == ["    H90O,A800x under $2/h",
                                                              "    ^^^^"]


@pytest.mark.parametrize(("text", "first_line"), [
    ("at least 8x", "the rule names no GPU (write e.g. `8x H100 under $25/h`)"),
    ("at", "unknown GPU 'at'"),
    ("at least", "unknown GPU 'at least'"),
])
def test_a_rule_of_only_its_count_words_says_what_is_missing(text, first_line):
    assert show(text).splitlines()[0] == first_line


def test_a_misspelt_keyword_after_the_gpu():
    message = show("H100 undr $2/h")
    assert message.splitlines() == ["unexpected word 'undr'; did you mean under?",
                                    "    H100 undr $2/h", "         ^^^^"]


@pytest.mark.parametrize(("text", "first_line", "caret"), [
    ("H100 under $2/h on vastia", "unknown source 'vastia'", "vastia"),
    ("H100 under $2/h in vastia", "unknown source 'vastia'", "vastia"),
    ("H100 under 2 XYZ/h", "unknown currency 'XYZ'", "XYZ/h"),
    ("H100 under $2/fortnight", "unknown price unit '/fortnight'", "$2/fortnight"),
    ("H100 under $2/h in aws,eu-*", "mixes sources and regions", "aws,eu-*"),
    ("H100 under $2/h per banana", "write `per instance` or `per GPU`", "banana"),
    ("H100 under $2/h spot on-demand", "contradicts an earlier word", "on-demand"),
    ("H100 drops 15 below its 7-day low", "needs a percentage", "15"),
    ("H100 under $2/h under $3/h", "two prices", "under"),
    ("H100 under $2/h not spot", "must be followed by", "spot"),
    ("under $2/h", "a rule starts with a GPU", "under"),
])
def test_errors_quote_the_rule_and_point_at_the_word(text, first_line, caret):
    lines = show(text).splitlines()
    assert first_line in lines[0]
    assert lines[1] == f"    {text}"
    start = lines[2].index("^")
    assert text[start - 4:].startswith(caret) and lines[2].count("^") == len(caret)


def test_suggestions_for_sources_and_currencies():
    assert "did you mean vastai?" in show("H100 under $2/h on vastia")
    assert "did you mean CNY?" in show("H100 under 2 CNX/h")


def test_a_rule_needs_a_condition():
    assert "no condition" in show("H100 in aws")
    assert "no condition" in show("H100")


def test_structured_form_equals_the_readable_form():
    structured = rule_from_mapping({"gpu": "A100-80GB", "pricing": "spot", "under": "1.5 USD/h",
                                    "sources": ["aws", "gcp"]})
    readable = parse_rule("A100-80GB spot under 1.5 USD/h in aws,gcp")
    assert structured.condition_hash() == readable.condition_hash()
    assert structured.text == "A100-80GB spot under $1.50/h on aws,gcp"


def test_structured_fields_and_options():
    r = Read(rule_from_mapping({
        "name": "big-h100", "gpu": ["H100"], "count": 8, "under": "$25/h", "per": "instance",
        "regions": "us-*", "not_sources": ["vastai"], "available": True, "vcpus": 96,
        "gpu_memory": "80GB", "notify": ["team-slack", "tag:oncall"], "for": 2,
        "repeat": "12h", "min_drop": "10%", "send_resolved": True, "top": 3,
        "mute_until": "2026-12-24T18:00Z", "hysteresis": "5%"}))
    assert (r.name, r.min_gpus, r.max_gpus, r.max_price, r.per_instance) == (
        "big-h100", 8, 8, 25.0, True)
    assert (r.regions, r.exclude_sources, r.available_only, r.min_vcpus, r.min_gpu_memory) == (
        ("us-*",), ("vastai",), True, 96.0, 80.0)
    assert r.notify == ("team-slack", "tag:oncall")
    assert (r.for_count, r.repeat, r.min_drop_pct, r.send_resolved, r.top) == (
        2, timedelta(hours=12), 0.10, True, 3)
    assert r.mute_until == datetime(2026, 12, 24, 18, 0, tzinfo=UTC) and r.hysteresis == 0.05


def test_structured_rule_with_readable_text_and_options():
    r = Read(rule_from_mapping({"rule": "H100 under $2/h", "name": "cheap-h100",
                           "min_drop": "$0.10", "for": "30m", "repeat": "never"}))
    assert (r.name, r.text, r.max_price) == ("cheap-h100", "H100 under $2/h", 2.0)
    assert (r.min_drop_abs, r.for_duration, r.repeat, r.repeat_set) == (
        0.10, timedelta(minutes=30), None, True)
    drop = Read(rule_from_mapping({"gpu": "H100", "drop": {"percent": 15, "days": 7}}))
    assert (drop.drop_pct, drop.drop_window) == (0.15, timedelta(days=7))


@pytest.mark.parametrize(("data", "message"), [
    ({"gpu": "H10O", "under": "$2/h"}, "gpu: unknown GPU 'H10O'; did you mean H100?"),
    ({"gpu": "H100", "undr": "$2/h"}, "unknown field 'undr'; did you mean under?"),
    ({"gpu": "H100", "under": "$2/h", "repeat": "often"}, "not a duration: 'often'"),
    ({"gpu": "H100", "under": "$2/h", "top": 0}, "top: a whole number"),
    ({"gpu": "H100", "count": 0, "under": "$25/h"}, "count: a GPU count must be more than zero"),
    ({"gpu": "H100", "min_gpus": 0, "under": "$25/h"}, "min_gpus: a GPU count must be more"),
    ({"gpu": "H100", "under": "$2/h", "sources": ["awz"]}, "unknown source 'awz'"),
    ({"gpu": "H100", "under": "$2/h", "mute_until": "tomorrow"}, "not a date/time"),
    ({"under": "$2/h"}, "names no GPU"),
    ({"gpu": "H100"}, "no condition"),
])
def test_structured_errors(data, message):
    with pytest.raises(RuleError) as info:
        rule_from_mapping(data)
    assert message in str(info.value)


def test_durations():
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("4h") == timedelta(hours=4)
    assert parse_duration("2 weeks") == timedelta(weeks=2)
    assert parse_duration(90) == timedelta(seconds=90)


# -- loading from the configuration -------------------------------------------------------
SLACK = "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx"


def config(tmp_path, text: str) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, database_url="sqlite:///" + str(tmp_path / "x.db"))


def test_rules_and_targets_from_the_config_and_a_rules_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "app-password-123")
    (tmp_path / "rules.yaml").write_text(
        "rules:\n"
        "  - 4090 under ¥2/h on autodl\n"
        "  - {gpu: H200, under: $3/h, notify: oncall}\n", encoding="utf-8")
    cfg = config(tmp_path, f"""
targets:
  team-slack: "{SLACK}"
  oncall-mail:
    url: "mailtos://alerts:${{TEST_SMTP_PASSWORD}}@smtp.example.com:587?to=ops@example.com"
    tags: [oncall]
rules:
  - H100 under $2/h
  - rule: 8x H100 under $25/h region us-*
    notify: [team-slack]
rules_file: rules.yaml
""")
    targets = load_targets(cfg)
    assert set(targets) == {"team-slack", "oncall-mail"}
    assert "app-password-123" in targets["oncall-mail"].urls[0]     # expanded for sending
    assert "app-password-123" not in targets["oncall-mail"].redacted()
    rules = load_rules(cfg)
    assert [r.name for r in rules] == ["h100-under-2", "8x-h100-under-25-region-us",
                                       "4090-under-2-on-autodl", "h200-under-3"]
    assert [r.targets for r in rules] == [("team-slack", "oncall-mail"), ("team-slack",),
                                          ("team-slack", "oncall-mail"), ("oncall-mail",)]


def test_every_bad_rule_is_reported_with_where_it_is(tmp_path):
    cfg = config(tmp_path, """
targets: {team: "json://127.0.0.1:9/hook"}
rules:
  - H10O under $2/h
  - H100 under $2/h
  - {name: x, gpu: H100, under: $2/h, notify: nobody}
""")
    with pytest.raises(RuleError) as info:
        load_rules(cfg)
    text = str(info.value)
    assert f"{tmp_path / 'config.yaml'}:4: rules[1]: unknown GPU 'H10O'; did you mean H100?" in text
    assert "rules[3]: notify: 'nobody' is neither a target nor a tag (targets: team)" in text


def test_duplicate_names_are_an_error_only_when_explicit(tmp_path):
    cfg = config(tmp_path, "rules:\n  - H100 under $2/h\n  - H100 under $2/h\n")
    assert [r.name for r in load_rules(cfg)] == ["h100-under-2", "h100-under-2-2"]
    cfg = config(tmp_path, "rules:\n  - {name: a, rule: H100 under $2/h}\n"
                           "  - {name: a, rule: H100 under $3/h}\n")
    with pytest.raises(RuleError, match="duplicate rule name 'a'"):
        load_rules(cfg)


@pytest.mark.parametrize(("spec", "message"), [
    ("slack://", "apprise cannot use the URL slack://<redacted>"),
    ("nosuchservice://user:hunter2secret@example.com", "nosuchservice://<redacted>"),
    ({"url": "json://x", "tagz": ["a"]}, "unknown key(s) tagz"),
    ({"tags": ["a"]}, "has no URL"),
    ("mailtos://u:${NOT_SET_ANYWHERE}@smtp.example.com", "NOT_SET_ANYWHERE is not set"),
])
def test_bad_targets_name_the_target_and_hide_the_secret(spec, message):
    with pytest.raises(ConfigError) as info:
        parse_targets({"oncall": spec}, "config.yaml")
    text = str(info.value)
    assert text.startswith("config.yaml: target 'oncall'") and message in text
    assert "hunter2secret" not in text


def test_redaction_uses_apprise_privacy_form():
    shown = redact("mailtos://alerts:app-password-123@smtp.example.com:587?to=ops@example.com")
    assert shown.startswith("mailtos://alerts:****@smtp.example.com")
    assert "app-password-123" not in shown
    assert "abcdefghijklmnopqrstuvwx" not in redact(SLACK)


def test_any_accelerator_with_memory_covers_gpus_tpus_and_npus():
    """`any accelerator with 80GB+` is every model of the catalog (GPU, TPU, NPU) with at
    least 80 GB per chip; RAM and vCPU clauses after it keep their meaning."""
    from gpuradar.alerts.grammar import parse_rule

    rule = parse_rule("any accelerator with 80GB+ under $2/h")
    offers = rule.condition.offers
    assert offers.gpus is None and offers.min_gpu_memory == 80.0
    assert rule.condition.basis == "gpu" and rule.condition.max_price == 2.0
    assert parse_rule("any accelerator 80GB+ under $2/h").condition.offers.min_gpu_memory == 80
    ram = parse_rule("any GPU with 256GB+ RAM under $9/h").condition.offers
    assert (ram.min_gpu_memory, ram.min_memory) == (None, 256.0)
    bare = parse_rule("any GPU 256GB+ RAM under $9/h").condition.offers  # without `with`
    assert (bare.min_gpu_memory, bare.min_memory) == (None, 256.0)
    tpu = parse_rule("TPU v5e under $1.20/h").condition
    assert tpu.offers.gpus == frozenset({"TPU-V5E"}) and tpu.basis == "gpu"


# -- counts, drops and the words around them ----------------------------------------------
def test_at_least_takes_a_glued_count():
    r = read("at least 8xH100 under $25/h")
    assert (r.gpus, r.min_gpus, r.max_gpus, r.basis) == (H100, 8.0, None, "offer")


def test_a_rule_of_only_at_least_is_a_rule_error():
    """Two words are not `at least COUNT`: the rule is refused as an unknown GPU."""
    assert show("at least").splitlines() == ["unknown GPU 'at least'", "    at least",
                                             "    ^^^^^^^^"]


def test_a_keyword_glued_to_a_count_is_pointed_at_without_the_count():
    assert show("8xspot H100 under $2/h").splitlines()[1:] == ["    8xspot H100 under $2/h",
                                                               "      ^^^^"]


def test_a_drop_of_100_percent_or_more_is_refused():
    for pct in ("100%", "100.5%"):
        text = f"H100 drops {pct} below its 7-day low"
        lines = show(text).splitlines()
        assert lines[0] == "the percentage must be between 0 and 100"
        assert lines[2] == "    " + " " * len("H100 drops ") + "^" * len(pct)


def test_a_missing_drop_window_points_at_the_word_in_its_place():
    text = "H100 drops 15% below its week low"
    assert show(text).splitlines()[1:] == [f"    {text}", "    " + " " * text.index("week")
                                           + "^^^^"]
    text = "H100 drops 15% below its"
    assert show(text).splitlines()[1:] == [f"    {text}", "    " + " " * len(text) + "^"]


def test_words_after_a_drop_clause_are_read():
    r = read("H100 drops 15% below its 7-day low spot on vastai")
    assert (r.drop_pct, r.pricing, r.sources) == (0.15, "spot", ("vastai",))


def test_a_drop_window_in_hours_is_said_in_hours():
    r = parse_rule("H100 drops 10% below its 12h low")
    assert r.reading() == "per GPU-hour, H100, any GPU count, 10% below its 12-hour low"
    assert r.describe() == "H100 drops 10% below its 12-hour low"


# -- the YAML form ---------------------------------------------------------------------------
def test_a_structured_drop_rule_is_described_and_named_by_its_drop():
    r = rule_from_mapping({"gpu": "H100", "drop": {"percent": 15, "days": 7}})
    assert (r.text, r.name) == ("H100 drops 15% below its 7-day low",
                                "h100-drops-15pct-below-its-7-day-low")


def test_a_structured_price_per_gpu_hour_keeps_its_basis_with_a_count():
    r = rule_from_mapping({"gpu": "H100", "count": 8, "under": "$3/GPU-h"})
    assert (r.condition.basis, r.text) == ("gpu", "8x H100 under $3/h per GPU")
    assert parse_rule(r.text).condition == r.condition


@pytest.mark.parametrize(("data", "text"), [
    ({"gpu": "H100", "count": 0.5, "under": "$2/h"}, "0.5x H100 under $2/h"),
    ({"gpu": "H100", "vcpus": 0, "under": "$2/h"}, "H100 under $2/h with 0+ vCPUs"),
])
def test_structured_counts_and_minimums_below_one_mean_what_the_readable_form_does(data, text):
    assert rule_from_mapping(data).condition == parse_rule(text).condition


def test_options_read_from_a_yaml_file_are_applied(tmp_path):
    cfg = config(tmp_path, "rules:\n  - {rule: H100 under $2/h, hysteresis: 5%}\n")
    assert [r.hysteresis for r in load_rules(cfg)] == [0.05]


def test_at_most_a_gpu_count_is_read_and_a_yaml_max_gpus_reads_back_as_it():
    from gpuradar.alerts.mapping import rule_from_mapping

    for text in ("H100 at most 4 GPUs under $2/h", "H100 at most 4x under $2/h"):
        rule = parse_rule(text)
        assert (rule.condition.offers.min_gpus, rule.condition.offers.max_gpus) == (None, 4)
        assert rule.reading() == "per GPU-hour, H100, at most 4 GPUs, under $2.0000/GPU-h"
    yaml_rule = rule_from_mapping({"gpu": "H100", "max_gpus": 4, "under": "$2/h"})
    assert yaml_rule.describe() == "H100 at most 4 GPUs under $2/h"
    assert parse_rule(yaml_rule.describe()).condition == yaml_rule.condition
    assert show("8x H100 at most 4 GPUs under $3/h").splitlines()[0] == (
        "`at most 4` is fewer than the rule's 8 GPUs")
    assert show("H100 at most four GPUs under $2/h").splitlines()[0] == (
        "`at most` needs a GPU count: write `at most 4 GPUs`")


def test_a_bare_number_price_leaves_the_next_word_to_its_own_clause():
    r = read("H100 under 2 spot")
    assert (r.max_price, r.currency, r.pricing) == (2.0, "USD", "spot")


def test_any_gpu_with_a_dangling_with_or_size_is_a_rule_error():
    assert show("any GPU with").startswith("the rule has no condition")
    assert show("any GPU with 80GB").startswith("the rule has no condition")
    assert show("any GPU 80GB").startswith("the rule has no condition")


def test_a_size_after_a_word_that_is_not_with_is_not_read_as_gpu_memory():
    assert show("any GPU spot 80GB under $2/h").splitlines()[0].startswith("'80GB' of what?")


def test_not_before_a_price_or_a_size_is_refused_at_that_word():
    for text, word in (("H100 under $2/h not 80GB+", "80GB+"), ("H100 not $2/h", "$2/h")):
        lines = show(text).splitlines()
        assert lines[0].startswith("`not` must be followed by")
        assert lines[2] == "    " + " " * text.index(word) + "^" * len(word)


def test_a_price_unit_that_contradicts_per_gpu_points_at_the_price():
    text = "H100 per GPU under $20/instance-h"
    assert show(text).splitlines()[2] == "    " + " " * text.index("$20") + "^" * 14


def test_an_unknown_gpu_after_a_comma_points_at_that_part_only():
    text = "H100,Foo Bar under $2/h"
    assert show(text).splitlines()[2] == "    " + " " * text.index("Foo") + "^" * len("Foo Bar")


def test_a_vcpu_count_after_the_gpu_is_a_clause_not_part_of_the_name():
    r = read("H100 32 vcpus under $2/h")
    assert (r.gpus, r.min_vcpus, r.max_price) == (H100, 32.0, 2.0)


def test_a_list_keyword_at_the_end_of_the_rule_says_what_it_needs():
    assert show("H100 under $2/h on").splitlines()[0] == (
        "`on` needs a source (aws, gcp, vastai, ...)")


def test_a_zero_day_drop_window_is_refused():
    text = "H100 drops 15% below its 0-day low"
    lines = show(text).splitlines()
    assert lines[0] == "the window must be longer than zero"
    assert lines[2] == "    " + " " * text.index("0-day") + "^^^^^"


def test_a_yaml_count_on_a_readable_rule_that_gave_no_basis_means_per_instance():
    r = Read(rule_from_mapping({"rule": "H100 under $2/h", "count": 8}))
    assert (r.min_gpus, r.max_gpus, r.per_instance) == (8, 8, True)


def test_a_yaml_drop_of_zero_percent_is_refused():
    with pytest.raises(RuleError, match="drop: percent must be more than 0"):
        rule_from_mapping({"gpu": "H100", "drop": {"percent": 0, "days": 7}})


def test_a_numeric_min_drop_is_an_amount_and_must_not_be_negative():
    r = Read(rule_from_mapping({"rule": "H100 under $2/h", "min_drop": 0.5}))
    assert (r.min_drop_pct, r.min_drop_abs) == (None, 0.5)
    with pytest.raises(RuleError, match="min_drop: must not be negative"):
        rule_from_mapping({"rule": "H100 under $2/h", "min_drop": -0.5})


def test_a_yaml_top_of_true_is_not_a_count():
    with pytest.raises(RuleError, match="top: a whole number"):
        rule_from_mapping({"gpu": "H100", "under": "$2/h", "top": True})


def test_with_is_not_part_of_the_any_gpu_name():
    assert parse_rule("any GPU with 8+ GPUs under $2/h").gpu_query == "any GPU"
    r = parse_rule("at least 8x any GPU with 80GB vram under $2/h")
    assert (r.gpu_query, r.condition.offers.min_gpu_memory) == ("any GPU", 80.0)


def test_a_yaml_count_keeps_the_per_gpu_basis_the_readable_rule_said():
    r = Read(rule_from_mapping({"rule": "H100 under $2/h per GPU", "count": 8}))
    assert (r.min_gpus, r.max_gpus, r.per_instance) == (8, 8, False)
    assert r.rule.condition == parse_rule("8x H100 under $2/h per GPU").condition


@pytest.mark.parametrize(("text", "lines"), [
    ("8x", ["the rule names no GPU (write e.g. `8x H100 under $25/h`)", "    8x", "      ^"]),
    ("H100 under $2/instance-h per GPU", [
        "'GPU' contradicts an earlier word", "    H100 under $2/instance-h per GPU",
        "                                 ^^^"]),
    ("H100 under $2/h with most 4 GPUs", [
        "unexpected word 'most'", "    H100 under $2/h with most 4 GPUs",
        "                         ^^^^"]),
    ("cheapest fit fro 7B finetune under $3/h", [
        "expected 'for' after 'fit'", "    cheapest fit fro 7B finetune under $3/h",
        "                 ^^^"]),
])
def test_what_a_rule_cannot_mean_is_said_at_the_word(text, lines):
    assert show(text).splitlines() == lines


def test_a_count_and_an_equal_upper_bound_agree_and_tiny_prices_keep_their_digits():
    assert parse_rule("8x H100 at most 8 GPUs under $20/h").condition.offers.max_gpus == 8
    assert parse_rule("H100 under $0.005/h").describe() == "H100 under $0.005/h"


def test_a_yaml_size_that_is_no_number_says_its_unit():
    from gpuradar.alerts.mapping import rule_from_mapping

    with pytest.raises(RuleError, match="gpu_memory: a number of GB, not 'lots'"):
        rule_from_mapping({"gpu": "H100", "under": "$2/h", "gpu_memory": "lots"})
    with pytest.raises(RuleError, match="vcpus: a number, not 'lots'"):
        rule_from_mapping({"gpu": "H100", "under": "$2/h", "vcpus": "lots"})


def test_at_most_without_its_gpus_and_a_yaml_drop_without_a_window():
    from gpuradar.alerts.mapping import rule_from_mapping

    assert show("H100 under $2/h at most 4").splitlines()[0] == (
        "`at most` needs a GPU count: write `at most 4 GPUs`")
    drop = rule_from_mapping({"gpu": "H100", "drop": {"percent": 15}})  # window: 7 days
    assert drop.describe() == "H100 drops 15% below its 7-day low"


def test_repeat_false_in_yaml_means_never():
    r = rule_from_mapping({"gpu": "H100", "under": "$2/h", "repeat": False})
    assert (r.repeat, r.repeat_set) == (None, True)


def test_a_rule_of_the_longest_length_is_read_and_one_character_more_is_refused():
    text = "H100 under $2/h"
    assert parse_rule(text.ljust(4000)).text.strip() == text
    with pytest.raises(RuleError, match="at most 4000 characters, this one has 4,001"):
        parse_rule(text.ljust(4001))


@pytest.mark.parametrize(("option", "value", "read"), [
    ("top", 1000, ("top", 1000)), ("for", 1, ("for_count", 1)),
    ("repeat", "1h", ("repeat", timedelta(hours=1)))])
def test_options_at_their_limits_are_read(option, value, read):
    r = rule_from_mapping({"gpu": "H100", "under": "$2/h", option: value})
    assert getattr(r, read[0]) == read[1]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("top", 1001, "top: a whole number of offers, 1 to 1000"),
    ("for", 0, "for: at least 1 (evaluation)"),
    ("for", -1, "for: at least 1 (evaluation)"),
    ("repeat", "0s", "repeat: must be longer than zero")])
def test_options_past_their_limits_are_refused(option, value, message):
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rule_from_mapping({"gpu": "H100", "under": "$2/h", option: value})


@pytest.mark.parametrize(("option", "value", "fields"), [
    ("name", "  cheap h100  ", {"name": "cheap h100"}),
    ("notify", "ops, #oncall", {"notify": ("ops", "#oncall")}),
    ("notify", ["ops", 7], {"notify": ("ops", "7")}),
    ("notify", {"targets": "ops", "tags": ["team"]}, {"notify": ("ops", "team")}),
    ("for", "3", {"for_count": 3, "for_duration": None}),
    ("for", "10m", {"for_count": None, "for_duration": timedelta(minutes=10)}),
    ("repeat", "never", {"repeat": None, "repeat_set": True}),
    ("min_drop", "5%", {"min_drop_pct": 0.05, "min_drop_abs": None}),
    ("min_drop", "$0.10", {"min_drop_pct": None, "min_drop_abs": 0.1}),
    ("send_resolved", False, {"send_resolved": False}),
    ("mute_until", "2026-12-01T08:00", {"mute_until": datetime(2026, 12, 1, 8, tzinfo=UTC)}),
    ("hysteresis", "2%", {"hysteresis": 0.02}),
    ("top", None, {"top": None})])  # None: left out
def test_each_option_sets_the_rule_fields_it_names(option, value, fields):
    r = rule_from_mapping({"gpu": "H100", "under": "$2/h", option: value})
    assert {f: getattr(r, f) for f in fields} == fields


@pytest.mark.parametrize(("option", "value", "message"), [
    ("name", "  ", "name: must not be empty"),
    ("notify", {"targets": "ops", "team": "x"},
     "notify: unknown key(s) team; use targets and tags"),
    ("notify", 5, "notify: a target name, a tag, or a list of them"),
    ("min_drop", "", "min_drop: write a percentage (5%) or an amount ($0.10), not ''"),
    ("send_resolved", "yes", "send_resolved: true or false"),
    ("hysteresis", "$0.10", "hysteresis: a percentage, e.g. 2%"),
    ("mute_until", "soon", "not a date/time: 'soon' (write e.g. 2026-12-01T08:00Z)")])
def test_each_option_refuses_a_bad_value_in_one_line_naming_it(option, value, message):
    with pytest.raises(RuleError) as err:
        parse_rule("H100 under $2/h", **{option: value})
    assert str(err.value) == f"{message}\n    H100 under $2/h"


# -- survivors of the third fresh rules sample (issue #31) ------------------------------
@pytest.mark.parametrize("text", ["", "   ", None])
def test_an_empty_or_missing_rule_is_refused_in_plain_words(text):
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == "empty rule (write e.g. `H100 under $2/h`)"


def test_a_bad_option_quotes_the_rule_without_a_caret():
    """The option, not a word of the rule, is wrong: no caret points into the rule."""
    with pytest.raises(RuleError) as err:
        parse_rule("H100 under $2/h", top=0)
    assert str(err.value) == "top: a whole number of offers, 1 to 1000\n    H100 under $2/h"


@pytest.mark.parametrize("text", ["any GPU", "any accelerator"])
def test_a_rule_that_ends_after_any_gpu_asks_for_a_condition_at_its_end(text):
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == (
        "the rule has no condition: say `under $2/h`, `drops 15% below its 7-day low` or "
        f"`available`\n    {text}\n    {' ' * len(text)}^")


@pytest.mark.parametrize(("text", "window"), [
    ("H100 index drops 10% in 7 days", timedelta(days=7)),
    ("H100 index drops 10% in 2 weeks", timedelta(days=14)),
    ("H100 index drops 10% in 7d", timedelta(days=7))])
def test_an_index_drop_window_may_be_written_in_two_words(text, window):
    r = Read(parse_rule(text))
    assert (r.index, r.drop_pct, r.drop_window) == (True, 0.1, window)


def test_an_index_drop_whose_window_lacks_its_unit_points_at_the_number():
    text = "H100 index drops 10% in 7"
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == (f"a window is missing: write `drops 10% in 7 days`\n    {text}\n"
                              f"    {' ' * (len(text) - 1)}^")


@pytest.mark.parametrize("words", ["GPU memory", "GPU mem", "VRAM"])
def test_gpu_memory_clauses_set_the_memory_per_gpu_not_the_ram(words):
    r = Read(parse_rule(f"H100 80GB+ {words} under $2/h"))
    assert (r.min_gpu_memory, r.min_memory) == (80.0, None)
    assert r.rule.describe() == "H100 with 80GB+ GPU memory under $2/h"


@pytest.mark.parametrize(("data", "first"), [
    ({"fit": "7B finetune", "gpu": "H100", "vcpus": 32}, "gpu"),
    ({"fit": "7B finetune", "vcpus": 32, "gpu": "H100"}, "vcpus")])
def test_a_fit_rule_names_the_first_field_it_does_not_take(data, first):
    with pytest.raises(RuleError) as err:
        rule_from_mapping(data)
    assert str(err.value) == (
        f"{first}: does not apply to a fit rule (it takes basis, currency, max_price, per, "
        "price, pricing, region, regions, source, sources, under)")


# -- survivors of the fourth fresh rules sample (issue #31) -----------------------------
_LONG = "H100 " + "region us-east-1 " * 130  # 261 words: past the small ints Python shares


@pytest.mark.parametrize("start", ["H100 ", _LONG], ids=["short", "261 words"])
@pytest.mark.parametrize(("end", "message"), [
    ("drops", "`drops` needs a percentage: write `drops 15% below its 7-day low`"),
    ("drops 15%", "a window is missing: write `drops 15% below its 7-day low`"),
    ("drops 15% below its", "a window is missing: write `drops 15% below its 7-day low`"),
    ("drops 15% below its 7-day", "`low` is missing: write `drops 15% below its 7-day low`"),
    ("index drops 10% in", "a window is missing: write `drops 10% in 7 days`"),
    ("under $2/h region", "`region` needs a region or glob (us-*, eu-west-1)"),
    ("under $2/h on", "`on` needs a source (aws, gcp, vastai, ...)"),
    ("under $2/h not in", "`in` needs sources (aws,gcp) or regions (us-*)"),
    ("at most", "`at most` needs a GPU count: write `at most 4 GPUs`"),
    ("under", "a price is missing (write e.g. $2/h, 1.5 USD/h, ¥2/h)")])
def test_a_rule_cut_short_after_a_keyword_points_just_past_its_end(start, end, message):
    """However long the rule, the caret stands one column past its last character."""
    text = start + end
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == f"{message}\n    {text}\n    {' ' * len(text)}^"


@pytest.mark.parametrize(("count", "caret"), [
    ("4+x", "^^^"), ("4x+", "^^^"),  # says both "4 or more" and "at most 4"
    ("0x", "^^"), ("0 GPUs", "^")])  # at most no GPU at all
def test_at_most_refuses_a_count_with_a_plus_or_of_zero(count, caret):
    """`at most 4+x` or `at most 0x`: refused, the caret under the count."""
    text = f"H100 at most {count} under $2/h"
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == ("`at most` needs a GPU count: write `at most 4 GPUs`\n"
                              f"    {text}\n    {' ' * 13}{caret}")


@pytest.mark.parametrize("fit", [None, 7, "   "])
def test_a_fit_field_that_is_not_a_job_text_is_refused(fit):
    with pytest.raises(RuleError) as err:
        rule_from_mapping({"fit": fit, "under": "$5/h"})
    assert str(err.value) == "fit: the job as text, e.g. `fit: 7B finetune`"


@pytest.mark.parametrize("seq", [1024, 4096])
def test_a_fit_rule_describes_a_sequence_length_shorter_or_longer_than_the_default(seq):
    r = parse_rule(f"fit for 7B finetune under $5/h seq {seq}")
    assert r.describe() == f"cheapest fit for 7B finetune under $5/h seq {seq}"
    assert f"seq {seq}," in r.reading()


# -- survivors of the fifth fresh rules sample (issue #31) ------------------------------
@pytest.mark.parametrize(("text", "message", "start", "width"), [
    ("A100 least H100 under $2/h", "unexpected word 'least'", 5, 5),
    ("at 8x H100 under $2/h", "unknown GPU 'at 8x H100'", 0, 10)])
def test_only_at_least_together_reads_as_a_minimum_count(text, message, start, width):
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == f"{message}\n    {text}\n    {' ' * start}{'^' * width}"


def test_a_long_name_is_cut_to_200_characters():
    assert parse_rule("H100 under $2/h", name="n" * 250).name == "n" * 200


@pytest.mark.parametrize("key", ["colour", "volume"])  # named before and after `top`
def test_an_unknown_option_is_refused(key):
    with pytest.raises(RuleError) as err:
        parse_rule("H100 under $2/h", **{key: 5})
    assert str(err.value) == f"unknown option {key!r}\n    H100 under $2/h"


def test_a_too_long_rule_is_quoted_by_its_first_40_characters():
    text = "H100 under $2/h on aws,gcp,azure,lambda,vastai region us-*".ljust(4001)
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == ("a rule is at most 4000 characters, this one has 4,001 "
                              "(it starts 'H100 under $2/h on aws,gcp,azure,lambda,')")


# -- survivors of the sixth fresh rules sample (issue #31) ------------------------------
@pytest.mark.parametrize("text", ["H100 under 2/h", "H100 under 2"])
def test_a_price_at_the_end_without_a_currency_is_in_dollars(text):
    r = Read(parse_rule(text))
    assert (r.max_price, r.currency) == (2.0, "USD")
    assert r.rule.describe() == "H100 under $2/h"


@pytest.mark.parametrize("words", ["below", "from the", "below its"])
def test_a_drop_reads_one_or_more_words_before_its_window(words):
    r = Read(parse_rule(f"H100 drops 15% {words} 7-day low"))
    assert (r.drop_pct, r.drop_window) == (0.15, timedelta(days=7))


@pytest.mark.parametrize(("text", "described"), [
    ("H100 index drops 10% in 7 days", "H100 index drops 10% in 7 days"),
    ("H100 index drops 25% in 2 weeks", "H100 index drops 25% in 14 days")])
def test_an_index_drop_describes_its_percentage_and_window(text, described):
    assert parse_rule(text).describe() == described


def test_a_fit_rule_points_at_a_sequence_length_that_is_not_a_number():
    text = "fit for 7B finetune seq abc under $5/h"
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == (f"'seq' needs a positive whole number\n    {text}\n"
                              f"    {' ' * 24}^^^")


@pytest.mark.parametrize(("word", "message"), [
    ("on", "'on' needs providers, e.g. on aws,gcp"),
    ("region", "'region' needs a glob, e.g. region us-*")])
@pytest.mark.parametrize("repeat", [1, 130], ids=["short", "264 words"])
def test_a_fit_rule_ending_in_a_place_word_points_past_its_end(word, message, repeat):
    text = "fit for 7B finetune under $5/h " + "per gpu " * repeat + word
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    assert str(err.value) == f"{message}\n    {text}\n    {' ' * len(text)}^"


@pytest.mark.parametrize(("window", "words"), [
    ("1m", "1-minute"), ("90s", "90-second"), ("2h", "2-hour"), ("1d", "1-day")])
def test_a_yaml_drop_window_is_described_in_its_largest_whole_unit(window, words):
    r = rule_from_mapping({"gpu": "H100", "drop": {"percent": 15, "window": window}})
    assert r.describe() == f"H100 drops 15% below its {words} low"


# -- survivors of the seventh fresh rules sample (issue #31) ----------------------------
def test_a_gpu_count_with_a_plus_sets_no_maximum():
    r = Read(parse_rule("H100 4+ GPUs under $2/h"))
    assert (r.min_gpus, r.max_gpus) == (4.0, None)


def test_equal_yaml_min_and_max_gpus_mean_exactly_that_many():
    r = rule_from_mapping({"gpu": "H100", "min_gpus": 4, "max_gpus": 4, "under": "$2/h"})
    assert (Read(r).min_gpus, Read(r).max_gpus) == (4.0, 4.0)
    assert r.describe() == "4x H100 under $2/h per instance"


def test_a_yaml_drop_of_zero_days_is_refused_by_its_days():
    with pytest.raises(RuleError) as err:
        rule_from_mapping({"gpu": "H100", "drop": {"percent": 15, "days": 0}})
    assert str(err.value) == "drop: days must be a whole number more than 0, not 0"


# -- survivors left by the last fresh rules samples (issue #31) -------------------------
@pytest.mark.parametrize(("text", "part"), [("RTX,4090 under $2/h", "RTX"),
                                            ("nvidia,H100 under $2/h", "nvidia")])
def test_an_unknown_gpu_in_a_list_written_without_spaces_is_named(text, part):
    """The list's words together name a GPU ('RTX,4090'), its first part alone does not:
    the error names that part, not a word past the GPU."""
    assert show(text).splitlines() == [f"unknown GPU {part!r}", f"    {text}",
                                       "    " + "^" * len(part)]


@pytest.mark.parametrize(("value", "pct"), [("0%", 0.0), ("99.5%", 0.995)])
def test_a_min_drop_percentage_at_its_limits_is_taken(value, pct):
    r = Read(rule_from_mapping({"rule": "H100 under $2/h", "min_drop": value}))
    assert (r.min_drop_pct, r.min_drop_abs) == (pct, None)


@pytest.mark.parametrize("value", ["-0.5%", "-5%", "100%", "150%"])
def test_a_min_drop_percentage_past_its_limits_is_refused(value):
    with pytest.raises(RuleError) as err:
        rule_from_mapping({"rule": "H100 under $2/h", "min_drop": value})
    assert str(err.value) == "min_drop: must be between 0% and 100%\n    H100 under $2/h"


@pytest.mark.parametrize(("text", "digest"), [
    ("H100 index under $2.50/h", "65d1550801367fc4"),
    ("H100 spot index drops 10% in 7 days", "62e8280fd15d6d9b")])
def test_an_index_rule_keeps_its_alert_identity(text, digest):
    """An index rule's stored alert state is keyed by its digest like any rule's: the same
    rule after an upgrade must not start afresh (nor fire again)."""
    assert parse_rule(text).condition_hash() == digest


@pytest.mark.parametrize(("notify", "names"), [
    ({"targets": "ops, pager", "tags": ["gpu"]}, ("ops", "pager", "gpu")),
    ({"targets": ["ops"], "tags": "gpu,night"}, ("ops", "gpu", "night"))])
def test_notify_targets_and_tags_are_a_list_or_a_comma_separated_text(notify, names):
    rule = rule_from_mapping({"rule": "H100 under $2/h", "notify": notify})
    assert rule.notify == names


def test_a_gpu_name_running_to_the_end_of_a_long_rule_points_at_its_bad_word():
    """Past 256 words (where `is` and `==` part ways) the GPU words may end the rule."""
    text = "H100 " + " ".join(["x"] * 299)
    assert show(text).splitlines() == ["unexpected word 'x'", f"    {text}", "         ^"]


@pytest.mark.parametrize("text", ["H100 under $2/h fast+", "H100 under $2/h +"])
def test_a_word_ending_in_a_plus_that_is_no_quantity_is_an_unexpected_word(text):
    """`32+ vCPUs` is a clause; `fast+` is not: it gets the unexpected-word error and its
    caret, like any word the grammar does not know."""
    word = text.split()[-1]
    assert show(text).splitlines() == [f"unexpected word {word!r}", f"    {text}",
                                       "    " + " " * text.index(word) + "^" * len(word)]


@pytest.mark.parametrize("text, message, start, width", [
    ("H100 under $2/h per", "`per` needs `instance` or `GPU`", 16, 3),
    ("H100 under its 30-day median", "the percentage is missing: write `under its 30-day "
     "median by 20%`", 28, 1),
    ("H100 under its 30-day median by", "the percentage is missing: write `under its 30-day "
     "median by 20%`", 31, 1),
    ("H100 under its 30-day price by 10%", "`median` is missing: write `under its 30-day "
     "median by 20%`", 22, 5)])
def test_a_rule_cut_short_or_misworded_after_per_or_its_window_points_at_the_place(
        text, message, start, width):
    """`per` as the last word, a median rule ending before its percentage, and a word
    other than `median` (one sorting after it too) after the window: each the error and
    its caret, at the word or just past the end."""
    assert show(text).splitlines() == [message, f"    {text}",
                                       "    " + " " * start + "^" * width]
