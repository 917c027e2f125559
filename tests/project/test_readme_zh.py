"""README.zh-CN.md, the Chinese quick start, stays true: the README links it in its first
lines, its commands and options exist, its configuration loads, its credentials are the ones
the spiders read, and its rules parse."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml

ROOT = Path(__file__).parents[2]
ZH = ROOT / "README.zh-CN.md"
CHINA = ("alibaba", "tencent", "huawei", "autodl")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", ZH.read_text(), re.MULTILINE | re.DOTALL)


def commands() -> list[list[str]]:
    """Every gpuradar command line of the guide's shell blocks, without the comment."""
    out = []
    for block in blocks("sh"):
        for line in block.splitlines():
            words = shlex.split(line.split(" #")[0])
            if words and words[0].endswith("/gpuradar"):
                out.append(words[1:])
    return out


def test_the_readme_links_the_chinese_quick_start_in_its_first_lines():
    assert any("(README.zh-CN.md)" in line
               for line in (ROOT / "README.md").read_text().splitlines()[:5])
    assert "(README.md)" in ZH.read_text().splitlines()[2]


def test_the_two_setup_commands_are_the_readmes_and_make_targets():
    def setup(text: str) -> list[str]:
        first = re.search(r"```sh\n(.*?)```", text, re.DOTALL).group(1)
        return [line.split("#")[0].strip() for line in first.splitlines()]

    assert setup(ZH.read_text()) == setup((ROOT / "README.md").read_text()) == [
        "make demo", "make test test-image"]
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    assert {"demo", "test", "test-image", "install"} <= targets
    # CI runs the README's second command
    assert "\nmake test test-image\n" in (ROOT / ".ci" / "run").read_text()


def test_every_command_and_option_of_the_guide_exists():
    from gpuradar.cli import app
    from gpuradar.core import gpus

    root = typer.main.get_command(app)
    assert len(commands()) >= 10
    for words in commands():
        command = root  # typer's own click: groups are the commands with subcommands
        while getattr(command, "commands", None) and words and words[0] in command.commands:
            command, words = command.commands[words[0]], words[1:]
        assert command is not root, words
        options = {o for p in command.params for o in p.opts}
        for i, word in enumerate(words):
            if word.startswith("--"):
                assert word in options, (command.name, word)
            if i and words[i - 1] == "--vendor":
                assert gpus.select(vendor=word), word
            if i and words[i - 1] == "--kind":
                assert gpus.select(kind=word), word
            if i and words[i - 1] == "--gpu":
                assert gpus.match_family(word), word


def example_options(source: str) -> set[str]:
    """The option names deploy/config.example.yaml documents for a source."""
    text = (ROOT / "deploy" / "config.example.yaml").read_text()
    section = re.search(rf"^  {source}:.*?\n(.*?)(?=^  \w+:)", text, re.MULTILINE | re.DOTALL)
    return set(re.findall(r"^\s+#\s+(\w+):", section.group(1), re.MULTILINE))


def test_the_configuration_loads_with_its_targets_and_rules(tmp_path, monkeypatch):
    from gpuradar.alerts.loader import load_rules, load_targets
    from gpuradar.core.config import load_config

    [config] = blocks("yaml")
    monkeypatch.setenv("DINGTALK_TOKEN", "token123")
    monkeypatch.setenv("WECOM_BOT_KEY", "key456")
    path = tmp_path / "config.yaml"
    path.write_text(config)
    cfg = load_config(path)
    targets = load_targets(cfg)
    rules = load_rules(cfg, targets)
    assert [r.text for r in rules] == ["4090 under ¥2/h on autodl",
                                       "910B under ¥15/h on huawei"]
    assert {r.condition.currency for r in rules} == {"CNY"}
    for source, options in yaml.safe_load(config)["sources"].items():
        assert source in CHINA
        assert set(options) <= example_options(source), source


def test_the_credentials_are_the_ones_the_spiders_read():
    from gpuradar.core.sources import providers

    text = ZH.read_text()
    table = text[text.index("| 来源 |"):text.index("配置文件（")]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    read = {env for name in CHINA for env in providers()[name].credentials.values()}
    assert named == read


@pytest.mark.parametrize("rule", [line for block in blocks("text") for line in
                                  block.splitlines() if line.strip()])
def test_every_rule_of_the_guide_parses_and_compares_in_cny(rule):
    from gpuradar.alerts.grammar import parse_rule

    parsed = parse_rule(rule)
    assert parsed.condition.currency == "CNY" and parsed.condition.offers.gpus


def test_every_link_points_to_a_file():
    for target in re.findall(r"\]\(([^)#]+)\)", ZH.read_text()):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_the_first_crawl_needs_no_key_and_keyed_sources_come_after_their_credentials():
    """Issue #35: the first crawl of the guide works without any key (the key-less Chinese
    source, alibaba, included); the sources that need keys are crawled only after the
    section that says how to set them."""
    from gpuradar.core.sources import providers

    text = ZH.read_text()
    credentials = text.index("## 国内云的配置：凭据")
    keyed = {name for name, cls in providers().items() if cls.requires_credentials}
    first_crawls = [w for w in commands() if w[0] == "crawl"]
    assert first_crawls
    for block_start in (m.start() for m in re.finditer(r"gpuradar crawl ", text)):
        line = text[block_start:text.index("\n", block_start)]
        named = set(line.split("#")[0].split()[2:])
        if block_start < credentials:
            assert named and not named & keyed, line
            assert "alibaba" in named
        else:
            assert named <= set(CHINA) | {"fx"}, line


def test_the_guide_shows_the_demo_the_page_recommend_and_the_source_check():
    text = ZH.read_text()
    said = [" ".join(w) for w in commands()]
    assert any(c.startswith("demo --timeline") for c in said)
    assert any(c.startswith("demo --keep") for c in said)
    assert any(c.startswith("recommend ") for c in said)
    assert any(c.startswith("sources --check") for c in said)
    assert "http://127.0.0.1:9109/" in text and "/readyz" in text
    assert "config init" in text


def test_the_wording_reads_naturally():
    """No half-translated phrasing a fluent reader would stumble on: Chinese punctuation
    inside Chinese sentences, no English filler words left in the prose."""
    prose = re.sub(r"```.*?```", "", ZH.read_text(), flags=re.DOTALL)
    prose = re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)|<[^>]+>|\([A-Za-z][^)]*\)", "", prose)
    for line in prose.splitlines():
        if line.startswith(("|", "#")) or not re.search(r"[\u4e00-\u9fff]", line):
            continue
        assert not re.search(r"[\u4e00-\u9fff][,;:](?!//)", line), line  # 全角标点
        assert not re.search(r"\b(the|and|with|for|of)\b", line), line
