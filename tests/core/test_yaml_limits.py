"""YAML read with limits (issue 38): an alias bomb inside allowed keys, a huge value, a huge
file and deep nesting are refused at once with a short error naming file and line; aliases
within the budget keep working; `tags` is a flat list of texts."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from gpuradar.alerts.loader import read_rules_file
from gpuradar.alerts.rules import RuleError
from gpuradar.core.config import (
    MAX_EXPANDED_CHARS,
    MAX_SCALAR_CHARS,
    MAX_YAML_NODES,
    ConfigError,
    load_config,
)


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def laughs_in_tags(levels: int = 9) -> str:
    """The billion laughs, each level a target whose tags alias the previous level's."""
    lines = ["targets:",
             '  t0: {url: "json://127.0.0.1:9/", tags: &l0 ["lol","lol","lol","lol","lol",'
             '"lol","lol","lol","lol"]}']
    for n in range(1, levels):
        refs = ",".join([f"*l{n - 1}"] * 9)
        lines.append(f'  t{n}: {{url: "json://127.0.0.1:9/", tags: &l{n} [{refs}]}}')
    return "\n".join(lines) + "\n"


def refused_quickly(load, *args, memory: bool = True) -> str:
    """The error `load(*args)` raises, checked to come within 100 MB (when `memory`: the
    bound a bomb would break). Its time is not asserted: a loaded machine must not fail it."""
    if memory:
        tracemalloc.start()
    try:
        with pytest.raises((ConfigError, RuleError)) as exc:
            load(*args)
        peak = tracemalloc.get_traced_memory()[1] if memory else 0
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, peak
    return str(exc.value)


def test_a_billion_laughs_in_target_tags_is_refused(tmp_path):
    cfg = write(tmp_path, laughs_in_tags())
    message = refused_quickly(load_config, cfg)
    # 9**6 values at level 6 (line 7) is the first beyond the budget
    assert message == (f"{cfg}:7: the aliases (*name) here expand to more than "
                       f"{MAX_YAML_NODES:,} values; write the values out instead")


def test_the_classic_bomb_and_a_merge_key_bomb_are_refused(tmp_path):
    classic = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{','.join(['*' + chr(97 + n)] * 9)}]\n"
        for n in range(8))
    assert "expand to more than" in refused_quickly(load_config, write(tmp_path, classic))
    merges = "m0: &m0 {a: 1, b: 2}\n" + "".join(
        f"m{n}: &m{n} {{<<: [{', '.join([f'*m{n - 1}'] * 8)}]}}\n" for n in range(1, 30))
    assert "expand to more than" in refused_quickly(load_config, write(tmp_path, merges,
                                                                       "m.yaml"))


def test_a_rules_file_has_the_same_limits(tmp_path):
    rules = write(tmp_path, "x: &x [a,a,a,a,a,a,a,a,a,a]\n" + "".join(
        f"x{n}: &x{n} [{','.join(['*x' if n == 0 else f'*x{n - 1}'] * 10)}]\n"
        for n in range(6)) + "rules: []\n", "rules.yaml")
    assert "expand to more than" in refused_quickly(read_rules_file, rules)


def test_a_huge_rule_is_refused_with_a_short_error(tmp_path):
    """A 10 MB rule string produced a 31 MB error (the word printed three times)."""
    cfg = write(tmp_path, 'rules:\n  - "H100 under ' + "x" * 10_000_000 + '"\n')
    message = refused_quickly(load_config, cfg)
    assert message == f"{cfg}: larger than 256 KiB; a configuration or rules file is at most that"
    cfg = write(tmp_path, 'rules:\n  - "H100 under ' + "x" * 100_000 + '"\n', "v.yaml")
    message = refused_quickly(load_config, cfg)
    assert message.startswith(f"{cfg}:2: a value of 100,011 characters (at most "
                              f"{MAX_SCALAR_CHARS:,}): 'H100 under xxx")
    assert len(message) < 250


def test_a_rule_longer_than_a_line_is_refused_by_the_grammar():
    from gpuradar.alerts.grammar import parse_rule

    with pytest.raises(RuleError) as exc:
        parse_rule("H100 under " + "x" * 60_000)
    assert str(exc.value) == ("a rule is at most 4000 characters, this one has 60,011 (it "
                              "starts 'H100 under " + "x" * 29 + "')")


def test_deep_nesting_is_refused(tmp_path):
    assert "nested more than 50 levels deep" in refused_quickly(
        load_config, write(tmp_path, "a: " + "[" * 60 + "]" * 60 + "\n"))
    assert "nested more than 50 levels deep" in refused_quickly(
        load_config, write(tmp_path, "a: " + "[" * 100_000 + "]" * 100_000 + "\n", "deep.yaml"))
    block = "a:\n" + "".join(" " * (n + 1) + f"k{n}:\n" for n in range(400))
    assert "nested more than 50 levels deep" in refused_quickly(
        load_config, write(tmp_path, block, "block.yaml"), memory=False)


def test_an_expanded_variable_has_the_value_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("HUGE", "x" * (MAX_SCALAR_CHARS + 1))
    cfg = write(tmp_path, "database_url: ${HUGE}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert exc.value.problems == [f"{cfg}:1: database_url: more than {MAX_SCALAR_CHARS:,} "
                                  "characters once ${...} is expanded (docs/limits.md)"]


def test_aliases_within_the_budget_still_work(tmp_path):
    cfg = write(tmp_path, """\
sources:
  lambda: &quiet {enabled: false}
  runpod: *quiet
  vastai: {<<: *quiet, interval: 10m}
targets:
  a: {url: "json://127.0.0.1:9/", tags: &team [ops, gpu]}
  b: {url: "json://127.0.0.1:9/", tags: *team}
""")
    config = load_config(cfg)
    assert config.sources["runpod"].written() == {"enabled": False}
    assert config.sources["vastai"].written() == {"enabled": False, "interval": 600}
    assert config.targets["b"].tags == ["ops", "gpu"]


@pytest.mark.parametrize("tags", ["[[ops, gpu]]", "[{team: ops}]", "{team: ops}", "[1]"])
def test_tags_are_a_flat_list_of_texts(tmp_path, tags):
    cfg = write(tmp_path, f'targets:\n  a: {{url: "json://127.0.0.1:9/", tags: {tags}}}\n')
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert exc.value.problems == [f"{cfg}:2: targets.a.tags: must be text or a flat list of "
                                  f"texts, got {'a mapping' if tags[0] == '{' else 'a list'} "
                                  "(value not shown)"]


# -- round four (issue 49) ----------------------------------------------------------------
def test_a_variable_used_many_times_is_refused_within_memory(tmp_path, monkeypatch):
    """25,000 uses of a 60,000-character variable took 1.6 GB and printed 431 KB: the whole
    file's values are bounded once expanded, and the read stops at the first value past.
    2,500 uses here: expanded, they would hold 150 MB, past the 100 MB bound checked."""
    monkeypatch.setenv("V", "x" * 60_000)
    tags = ",".join(['"${V}"'] * 2_500)
    cfg = write(tmp_path, f"targets:\n  t:\n    url: json://127.0.0.1:9/\n    tags: [{tags}]\n")
    error = refused_quickly(load_config, cfg)
    assert error == (f"{cfg}:4: targets.t.tags[18]: every value together holds more than "
                     f"{MAX_EXPANDED_CHARS:,} characters once ${{...}} is expanded "
                     "(docs/limits.md)")


def test_a_variable_too_long_everywhere_is_listed_at_most_20_times(tmp_path, monkeypatch):
    """At 120,000 characters every use was its own error line (25,001 lines, 2.6 MB for
    25,000 uses; 2,500 here)."""
    monkeypatch.setenv("V", "x" * 120_000)
    tags = ",".join(['"${V}"'] * 2_500)
    cfg = write(tmp_path, f"targets:\n  t:\n    url: json://127.0.0.1:9/\n    tags: [{tags}]\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert len(exc.value.problems) == 21 and exc.value.count == 2_500
    assert exc.value.problems[-1] == "... and 2,480 more like these"
    assert "(and 2,499 more problems" in str(exc.value)
    assert sum(map(len, exc.value.problems)) < 5000


@pytest.mark.parametrize("text", ["metrics: {port: 1%s}\n", "rules:\n  - {gpu: H100, count: 1%s}\n",
                                  "metrics:\n  port: ${BIG}\n"])
def test_a_whole_number_of_thousands_of_digits_is_one_line(tmp_path, monkeypatch, text):
    """int() refuses 4,300 digits and more: that was a 127-line traceback."""
    monkeypatch.setenv("BIG", "1" + "0" * 5000)
    cfg = write(tmp_path, text.replace("%s", "0" * 5000))
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert str(exc.value).endswith("a whole number of 5,001 digits (at most 100)")


def test_a_value_given_through_a_variable_is_not_quoted_in_its_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SMTP_PASSWORD", "SmtpSEKRETpw4321")
    cfg = write(tmp_path, "metrics:\n  port: ${SMTP_PASSWORD}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert "SEKRET" not in str(exc.value)
    assert str(exc.value) == f"{cfg}:2: metrics.port: must be a whole number, got text " \
                             "(value not shown)"


def test_docs_limits_states_each_limit_as_the_code_has_it():
    """docs/limits.md is the one place the input limits are stated: each constant's name
    and value are there."""
    from gpuradar.core.config import yamlfile
    from gpuradar.core.text import MAX_ECHO
    from gpuradar.scheduler import http_api
    from gpuradar.storage.dataset import MAX_GPU_QUERY
    from gpuradar.storage.export import MAX_MANIFEST_BYTES

    text = (Path(__file__).parents[2] / "docs" / "limits.md").read_text()
    stated = {"MAX_YAML_BYTES": f"{yamlfile.MAX_YAML_BYTES // 1024} KiB",
              "MAX_SCALAR_CHARS": f"{yamlfile.MAX_SCALAR_CHARS:,} characters",
              "MAX_EXPANDED_CHARS": f"{yamlfile.MAX_EXPANDED_CHARS:,} characters",
              "MAX_INT_DIGITS": f"{yamlfile.MAX_INT_DIGITS} digits",
              "MAX_YAML_NODES": f"{yamlfile.MAX_YAML_NODES:,}",
              "MAX_YAML_DEPTH": f"{yamlfile.MAX_YAML_DEPTH} levels",
              "MAX_PROBLEMS": f"| {yamlfile.MAX_PROBLEMS} |",
              "MAX_ECHO": f"at most {MAX_ECHO} characters",
              "MAX_REQUEST_LINE": f"{http_api.MAX_REQUEST_LINE:,} bytes",
              "MAX_FIELDS": f"| {http_api.MAX_FIELDS} |",
              "MAX_VALUE_CHARS": f"{http_api.MAX_VALUE_CHARS} characters",
              "MAX_ITEMS": f"| {http_api.MAX_ITEMS} |",
              "MAX_DAYS": f"{http_api.MAX_DAYS:,} (100 years)",
              "MAX_GPU_QUERY": f"longer than {MAX_GPU_QUERY} characters",
              "MAX_MANIFEST_BYTES": f"at most {MAX_MANIFEST_BYTES // 2**20} MiB"}
    for name, value in stated.items():
        assert name in text and value in text, (name, value)
