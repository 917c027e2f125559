"""Every rule field is checked the same in the readable and the mapping form (issue 38): a
price limit of zero or less could never fire and is refused in both, with the file and line
of the rule; counts, windows and names are checked alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.loader import load_rules
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.rules import RuleError
from gpuradar.core.config import load_config

# (readable form, mapping form, what both say)
BOTH_REFUSE = [
    ("H100 under $0/h", {"gpu": "H100", "under": 0}, "a price must be more than 0, not 0"),
    ("H100 under $0.00/h", {"gpu": "H100", "under": "$0/h"},
     "a price must be more than 0, not 0"),
    ("H100 under $2000000000/h", {"gpu": "H100", "under": 2e9},
     "a price must be at most 1,000,000,000 per hour, not 2e+09"),
    ("cheapest fit for 7B finetune under $0/h", {"fit": "7B finetune", "under": 0},
     "a price must be more than 0, not 0"),
]


@pytest.mark.parametrize("text, mapping, message", BOTH_REFUSE,
                         ids=[t for t, _, _ in BOTH_REFUSE])
def test_a_price_limit_is_checked_alike_in_both_forms(text, mapping, message):
    with pytest.raises(RuleError) as readable:
        parse_rule(text)
    assert readable.value.message == message
    with pytest.raises(RuleError) as structured:
        rule_from_mapping(mapping)
    assert structured.value.message.endswith(message)


@pytest.mark.parametrize("mapping, message", [
    ({"gpu": "H100", "under": -2}, "under: a price must be more than 0, not -2"),
    ({"gpu": "H100", "max_price": -2}, "max_price: a price must be more than 0, not -2"),
    ({"gpu": "H100", "under": float("nan")}, "under: a price must be a number, not nan"),
    ({"gpu": "H100", "under": [2]}, "under: a price such as 2 or $2/h, not list"),
    ({"gpu": [["H100"]], "under": 2}, "gpu: a name or a flat list of names"),
    ({"gpu": "H100", "under": 2, "regions": [{"us": 1}]},
     "regions: a name or a flat list of names"),
    ({"gpu": "H100", "under": 2, "count": float("inf")}, "count: a number, not inf"),
    ({"gpu": "H100", "under": 20, "min_gpus": 8, "max_gpus": 4},
     "max_gpus: 4 is fewer than min_gpus 8"),
    ({"gpu": "H100", "drop": {"percent": 10, "days": -3}},
     "drop: days must be a whole number more than 0, not -3"),
    ({"gpu": "H100", "drop": {"percent": 10, "windw": "3d"}},
     "drop: unknown key(s) windw; use percent and window (or days)"),
    ({"gpu": "H100", "under": 2, "regions": "us-" + "x" * 6000},
     "regions is at most 4000 characters, this one has 6,003"),
])
def test_a_mapping_field_is_refused_as_the_text_form_would(mapping, message):
    with pytest.raises(RuleError) as exc:
        rule_from_mapping(mapping)
    assert exc.value.message.startswith(message), exc.value.message


def test_the_mapping_form_negative_rule_is_refused_with_file_and_line(tmp_path: Path):
    """It passed `config check`, `rules check` and `run`, shown as "H100 under $-2./h"."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("rules:\n  - H100 under $2/h\n  - {gpu: H100, under: -2}\n"
                   "  - gpu: A100\n    under: 0\n")
    with pytest.raises(RuleError) as exc:
        load_rules(load_config(cfg))
    assert str(exc.value).splitlines() == [
        f"{cfg}:3: rules[2]: under: a price must be more than 0, not -2",
        f"{cfg}:4: rules[3]: under: a price must be more than 0, not 0",
    ]


def test_good_rules_still_read_the_same():
    assert rule_from_mapping({"gpu": "H100", "under": 2}).text == "H100 under $2/h"
    assert parse_rule("H100 under $2/h").condition.max_price == 2.0
    assert rule_from_mapping({"gpu": "H100", "drop": {"percent": 10, "days": 3}}
                             ).condition.drop_window.days == 3
