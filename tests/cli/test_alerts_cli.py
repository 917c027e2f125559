"""`gpuradar rules check|test`, `gpuradar alerts`, `gpuradar notify test`, as a user runs
them: exit codes and what is printed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from typer.testing import CliRunner

from gpuradar.alerts.delivery import deliver_pending
from gpuradar.alerts.engine import evaluate
from gpuradar.alerts.loader import load_rules, load_targets
from gpuradar.cli import app  # every command
from gpuradar.core.config import load_config
from gpuradar.storage.db import open_database
from tests.alerts.test_alert_engine import T0, crawl, offer
from tests.alerts.test_delivery import WebhookReceiver
from tests.helpers import free_port

runner = CliRunner()


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_rules_check_accepts_a_good_file(tmp_path):
    rules = write(tmp_path, "rules.yaml", "rules:\n  - H100 under $2/h\n"
                  "  - {name: big, rule: 8x H100 under $25/h region us-*, repeat: 12h}\n")
    config = write(tmp_path, "config.yaml", "targets: {team: 'json://127.0.0.1:9/hook'}\n")
    result = runner.invoke(app, ["rules", "check", str(rules), "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert "2 rules OK" in result.output
    assert "h100-under-2" in result.output and "repeat 12h" in result.output


def test_rules_check_points_at_the_bad_word_and_exits_1(tmp_path):
    rules = write(tmp_path, "rules.yaml", "rules:\n  - H10O under $2/h\n  - H100 under $2/h\n")
    result = runner.invoke(app, ["rules", "check", str(rules)], env={"GPURADAR_CONFIG": ""})
    assert result.exit_code == 1
    out = result.output
    assert "rule 1: unknown GPU 'H10O'; did you mean H100?" in out
    assert "    H10O under $2/h\n    ^^^^" in out
    assert "1 bad rule, 1 good" in out


def test_rules_check_reports_a_malformed_target_without_its_secret(tmp_path):
    config = write(tmp_path, "config.yaml",
                   "targets:\n  oncall: 'nosuchservice://admin:hunter2secret@example.com'\n"
                   "rules: [H100 under $2/h]\n")
    result = runner.invoke(app, ["rules", "check", "-c", str(config)])
    assert result.exit_code == 2
    assert ("target 'oncall': apprise cannot use the URL nosuchservice://<redacted>"
            in flat(result.output))
    assert "hunter2secret" not in result.output


def test_rules_check_without_rules_says_so(tmp_path):
    """No rules configured: it printed an empty table and "0 rules OK"."""
    config = write(tmp_path, "config.yaml", "sources: {}\n")
    result = runner.invoke(app, ["rules", "check", "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert flat(result.output).startswith("no rules configured: add them under `rules:`")
    assert "0 rules OK" not in result.output and "read as" not in result.output
    empty = write(tmp_path, "rules.yaml", "rules: []\n")
    result = runner.invoke(app, ["rules", "check", str(empty), "-c", str(config)])
    assert result.exit_code == 0 and flat(result.output) == f"no rules in {empty}"
    result = runner.invoke(app, ["rules", "check", "--json", "-c", str(config)])
    assert json.loads(result.stdout) == []



def test_a_price_that_holds_everywhere_meets_region_rules_and_rules_test_says_so(db_url):
    """An offer priced for every region (region `global`: OCI's list price, Lambda's public
    page) is in every region a rule names and in none it excludes; `rules test` says so in its
    reading. Before, `region us-*` never matched OCI at all."""
    engine = open_database(db_url)
    now = datetime.now(UTC)
    crawl(engine, [offer("BM.GPU.H100.8", 1.90, source="oci", region="global", at=now)],
          source="oci", at=now)
    crawl(engine, [offer("gpu_8x_h100", 1.87, region="eu-central-1", at=now)], at=now)
    result = runner.invoke(app, ["rules", "test", "H100 under $2/h region us-*", "--json",
                                 "--database-url", db_url])
    assert result.exit_code == 0, result.output
    (only,) = json.loads(result.stdout)
    assert (only["would_fire"], only["matches"]) == (True, 1)
    text = runner.invoke(app, ["rules", "test", "H100 under $2/h region us-*",
                               "--database-url", db_url])
    out = flat(text.output)
    assert "BM.GPU.H100.8" in out and "gpu_8x_h100" not in out
    assert ("a price that holds in every region (region global) counts as in every region "
            "named and in none excluded") in out
    excluded = runner.invoke(app, ["rules", "test", "H100 under $2/h not region us-*",
                                   "--json", "--database-url", db_url])
    (only,) = json.loads(excluded.stdout)
    assert only["matches"] == 2  # the global price holds outside us-* too
    mainland = runner.invoke(app, ["rules", "test", "H100 under $2/h region mainland",
                                   "--json", "--database-url", db_url])
    assert json.loads(mainland.stdout)[0]["matches"] == 0

def test_rules_check_missing_file_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["rules", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "does not exist" in flat(result.output)


def test_rules_test_shows_what_would_fire_without_sending(db_url):
    engine = open_database(db_url)
    now = datetime.now(UTC)
    crawl(engine, [offer("gpu_8x_h100", 1.87, at=now), offer("gpu_1x_h100", 2.49, count=1,
                                                             at=now)], at=now)
    result = runner.invoke(app, ["rules", "test", "H100 under $2/h", "--database-url", db_url])
    assert result.exit_code == 0, result.output
    assert "would fire: 1 offer from $1.8700/GPU-h" in result.output
    assert "gpu_8x_h100" in result.output and "gpu_1x_h100" not in result.output
    as_json = runner.invoke(app, ["rules", "test", "H100 under $1/h", "--json",
                                  "--database-url", db_url])
    (only,) = json.loads(as_json.stdout)
    assert (only["would_fire"], only["matches"], only["stored_state"]) == (False, 0, "inactive")
    bad = runner.invoke(app, ["rules", "test", "H100 undr $2/h", "--database-url", db_url])
    assert bad.exit_code == 2 and "did you mean under?" in flat(bad.output)
    # Nothing was written: no alert state, no notification.
    listing = runner.invoke(app, ["alerts", "--json", "--database-url", db_url])
    assert json.loads(listing.stdout) == {"alerts": [], "notifications": []}
    # --all with nothing to show said "no alert is firing", as if it had not looked further
    plain = runner.invoke(app, ["alerts", "--database-url", db_url]).stdout
    assert plain.splitlines()[0] == "no alert is firing (--all shows resolved ones)"
    every = runner.invoke(app, ["alerts", "--all", "--database-url", db_url]).stdout
    assert every.splitlines()[0] == "no alert has fired yet"


def test_alerts_lists_firing_alerts_and_the_notification_log(tmp_path, db_url):
    dead = free_port()
    config = write(tmp_path, "config.yaml", f"""
targets:
  hook: "json://alerts:s3cr3t-hook-password@127.0.0.1:{dead}/hook?retry=0"
rules: ["H100 under $2/h"]
""")
    cfg = load_config(config, database_url=db_url)
    engine = open_database(db_url)
    crawl(engine, [offer("a", 1.87)])
    evaluate(engine, load_rules(cfg), now=T0)
    deliver_pending(engine, load_targets(cfg))
    result = runner.invoke(app, ["alerts", "-c", str(config), "--database-url", db_url])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "h100-under-2" in out and "firing" in out and "$1.87" in out
    assert "rule:h100-under-2" in out and "pending" in out and "Connection" in out
    assert "s3cr3t" not in out
    data = json.loads(runner.invoke(app, ["alerts", "--json", "--database-url", db_url]).stdout)
    assert data["alerts"][0]["state"] == "firing"
    assert data["notifications"][0]["attempts"] == 1
    assert "s3cr3t" not in json.dumps(data)


def test_notify_test_reports_per_target(tmp_path):
    dead = free_port()
    with WebhookReceiver() as hook:
        config = write(tmp_path, "config.yaml", f"""
targets:
  good: "{hook.url()}"
  dead: "json://user:s3cr3tpass@127.0.0.1:{dead}/hook?retry=0"
""")
        ok = runner.invoke(app, ["notify", "test", "good", "-c", str(config)])
        assert ok.exit_code == 0, ok.output
        assert len(hook.posts) == 1
        assert hook.posts[0]["json"]["title"] == "gpuradar test notification"
        assert "sent" in ok.output and "webhook" in ok.output
        both = runner.invoke(app, ["notify", "test", "-c", str(config)])
    assert both.exit_code == 1
    assert "FAILED" in both.output and "sent" in both.output
    assert "s3cr3tpass" not in both.output
    unknown = runner.invoke(app, ["notify", "test", "goood", "-c", str(config)])
    assert unknown.exit_code == 2 and "did you mean good?" in flat(unknown.output)


def test_rules_check_says_how_each_rule_was_read(tmp_path):
    rules = write(tmp_path, "rules.yaml", "rules:\n  - 8x H100 under $25/h\n"
                  "  - H100 under $2/h\n  - {gpu: A100, count: 8, under: $10/h, basis: gpu}\n")
    result = runner.invoke(app, ["rules", "check", str(rules), "--json"],
                           env={"GPURADAR_CONFIG": ""})
    assert result.exit_code == 0, result.output
    read = {r["name"]: r["read_as"] for r in json.loads(result.stdout)}
    assert read["8x-h100-under-25"] == "whole offer, exactly 8x H100, under $25.00/h"
    assert read["h100-under-2"] == "per GPU-hour, H100, any GPU count, under $2.0000/GPU-h"
    assert read["8x-a100-under-10-per-gpu"] == (
        "per GPU-hour, exactly 8x A100, under $10.00/GPU-h")
    table = runner.invoke(app, ["rules", "check", str(rules)], env={"GPURADAR_CONFIG": ""})
    assert "whole offer, exactly 8x H100" in flat(table.output)


def test_a_window_beyond_the_limit_is_refused_without_a_traceback(tmp_path, sqlite_url):
    text = "H100 drops 15% below its 999999-day low"
    rules = write(tmp_path, "rules.yaml", f"rules:\n  - {text}\n")
    check = runner.invoke(app, ["rules", "check", str(rules)], env={"GPURADAR_CONFIG": ""})
    assert check.exit_code == 1
    assert "duration '999999d' is longer than the limit of 3660 days" in flat(check.output)
    tested = runner.invoke(app, ["rules", "test", text, "--database-url", sqlite_url],
                           env={"GPURADAR_CONFIG": ""})
    assert tested.exit_code == 2 and "limit of 3660 days" in flat(tested.output)
    assert "Traceback" not in tested.output


def test_notify_preview_shows_every_form_without_sending(tmp_path, sqlite_url):
    engine = open_database(sqlite_url)
    now = datetime.now(UTC)
    crawl(engine, [offer("gpu_8x_h100", 2.95, at=now)], at=now)
    with WebhookReceiver() as hook:
        config = write(tmp_path, "config.yaml", f"""
targets: {{hook: "{hook.url()}"}}
rules: [{{name: big, rule: "8x H100 under $25/h"}}]
""")
        result = runner.invoke(app, ["notify", "preview", "big", "-c", str(config),
                                     "--database-url", sqlite_url])
        assert hook.posts == []
    assert result.exit_code == 0, result.output
    out = result.output
    for label in ("title", "Markdown (Slack, webhooks)", "plain text", "email HTML",
                  "email plain-text part"):
        assert label in out
    assert "8x H100 under $25/h — 1 offer from $23.60/h" in out
    assert "**$23.60/h for 8 GPUs** · $2.9500/GPU-h" in out
    assert "<b>$23.60/h for 8 GPUs</b>" in out
    assert "- lambda us-east-1 — 8x H100-SXM-80GB, on-demand" in out
    # The same from `rules test --render`; nothing was stored or queued.
    rendered = runner.invoke(app, ["rules", "test", "big", "--render", "-c", str(config),
                                   "--database-url", sqlite_url])
    assert rendered.exit_code == 0 and "email plain-text part" in rendered.output
    listing = runner.invoke(app, ["alerts", "--json", "--database-url", sqlite_url])
    assert json.loads(listing.stdout) == {"alerts": [], "notifications": []}


LONG_RULE = ("H100 in " + ",".join(f"us-east-{i}" for i in range(30)) + " under $2/h")


def test_an_inline_rule_longer_than_a_file_name_is_read_as_a_rule(sqlite_url):
    """More than 255 characters before its first `/`: tried as a file first, it ended in
    `OSError: [Errno 36] File name too long` (issue 49, finding 8)."""
    env = {"GPURADAR_CONFIG": ""}
    tested = runner.invoke(app, ["rules", "test", LONG_RULE, "--database-url", sqlite_url],
                           env=env)
    assert tested.exit_code == 0, tested.output
    assert "us-east-29" in tested.output
    preview = runner.invoke(app, ["notify", "preview", LONG_RULE, "--database-url",
                                  sqlite_url], env=env)
    assert preview.exception is None or isinstance(preview.exception, SystemExit), \
        preview.output
    check = runner.invoke(app, ["rules", "check", LONG_RULE], env=env)
    assert check.exit_code == 2
    assert flat(check.output).endswith("does not exist (to read one rule: gpuradar rules "
                                       "test 'RULE')")
