"""`gpuradar config init`: a commented starter configuration written from the schema."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from gpuradar.cli import app
from gpuradar.core.config import load_config, schema
from gpuradar.core.sources import providers

runner = CliRunner()


def test_init_writes_every_key_commented_and_the_file_checks(tmp_path):
    path = tmp_path / "conf" / "config.yaml"
    result = runner.invoke(app, ["config", "init", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert all(line == "" or line.startswith("#") for line in text.splitlines())
    cfg = load_config(path)  # as written: the defaults
    assert cfg.path == path
    root = schema()
    for section in ("alerts", "metrics", "daemon"):
        model = root.model_fields[section].annotation
        for name, field in model.model_fields.items():
            assert re.search(rf"^#   {field.alias or name}:", text, re.M), (section, name)
    for name, cls in providers().items():
        assert f"#   {name}:" in text
        for env in (getattr(cls, "credentials", {}) or {}).values():
            assert env in text
    check = runner.invoke(app, ["config", "check", str(path)], env={"COLUMNS": "120"})
    assert check.exit_code == 0, check.output


def test_an_uncommented_section_is_valid(tmp_path):
    path = tmp_path / "config.yaml"
    assert runner.invoke(app, ["config", "init", str(path)]).exit_code == 0
    text = path.read_text()
    for section in ("alerts:", "metrics:", "daemon:", "targets:", "rules:"):
        block = text.split(f"# {section}\n", 1)[1].split("\n\n", 1)[0]
        body = "\n".join(line[2:] for line in block.splitlines() if not line.startswith("#   #"))
        one = tmp_path / f"{section[:-1]}.yaml"
        one.write_text(f"{section}\n{body}\n")
        cfg = load_config(one)
        assert cfg is not None, section


def test_init_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("database_url: sqlite:///mine.db\n")
    result = runner.invoke(app, ["config", "init", str(path)])
    assert result.exit_code == 2 and "exists; give --force" in result.output
    assert path.read_text() == "database_url: sqlite:///mine.db\n"
    assert runner.invoke(app, ["config", "init", str(path), "--force"]).exit_code == 0
    assert path.read_text().startswith("# gpuradar configuration")


def test_init_writes_through_no_link_and_waits_on_no_fifo(tmp_path):
    """A dangling link was written through (its target created); --force onto a FIFO
    blocked (issue 49, finding 13)."""
    import os

    link = tmp_path / "config.yaml"
    link.symlink_to(tmp_path / "elsewhere" / "made.yaml")
    for args in ([str(link)], [str(link), "--force"]):
        result = runner.invoke(app, ["config", "init", *args])
        assert result.exit_code == 2
        assert "is a symbolic link; give the path of a plain file" in " ".join(
            result.output.split())
    assert not (tmp_path / "elsewhere").exists()
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    result = runner.invoke(app, ["config", "init", str(fifo), "--force"])
    assert result.exit_code == 2
    assert "is a named pipe, not a regular file" in " ".join(result.output.split())


def test_init_shows_the_real_default_database_and_calls_only_durations_seconds(tmp_path):
    """The starter file showed `database_url: sqlite:///gpuradar.db` (a file wherever the
    command runs) as the default, and labelled counts and ratios (max_attempts,
    AUTOTHROTTLE_TARGET_CONCURRENCY, GPURADAR_SHRINK_GUARD) "seconds for durations"."""
    from tests.cli.test_terminal import in_terminal

    path = tmp_path / "config.yaml"
    data = tmp_path / "data"
    code, out = in_terminal("config", "init", str(path), env={"GPURADAR_DATA_DIR": str(data)})
    assert code == 0, out
    text = path.read_text()
    assert f"# database_url: null    # default: sqlite:///{data / 'gpuradar.db'} " \
           "(GPURADAR_DATA_DIR moves it)" in text
    assert "sqlite:///gpuradar.db" not in text
    for key in ("max_attempts", "AUTOTHROTTLE_TARGET_CONCURRENCY", "GPURADAR_SHRINK_GUARD"):
        line = next(x for x in text.splitlines() if x.lstrip("# ").startswith(f"{key}:"))
        assert "seconds" not in line, line
    for key in ("grace_period", "stop_timeout", "backoff_max"):
        line = next(x for x in text.splitlines() if x.lstrip("# ").startswith(f"{key}:"))
        assert line.endswith("# seconds, or 5m, 1h, 2d"), line
