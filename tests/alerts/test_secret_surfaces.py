"""A secret given through `${VAR}` in a notification target's URL, wherever in the URL it
sits (a webhook's path, its query, its user or password) and however plain a token it is:
it reaches no output, no log line at any level (apprise's own debug lines included), no
database row and no error (issue 49, finding 1)."""

from __future__ import annotations

import io
import json
import logging

import pytest
from sqlalchemy import text

from gpuradar.alerts.delivery import deliver_pending
from gpuradar.alerts.loader import load_targets
from gpuradar.core.config import load_config
from gpuradar.core.logs import REDACT, config_secrets, setup_logging
from tests.alerts.test_delivery import fire
from tests.clirun import gpuradar
from tests.helpers import free_port

# letters only and short: nothing about it looks like a token (url_secrets would not mask it)
SECRET = "hushhushword"


@pytest.mark.parametrize("where", [
    "json://127.0.0.1:{port}/hooks/${{SLACK_TOKEN}}?retry=0",
    "json://127.0.0.1:{port}/hooks?token=${{SLACK_TOKEN}}&retry=0",
    "json://${{SLACK_TOKEN}}@127.0.0.1:{port}/hooks?retry=0",
    "json://bot:${{SLACK_TOKEN}}@127.0.0.1:{port}/hooks?retry=0",
])
def test_a_secret_from_the_environment_reaches_no_surface(where, tmp_path, sqlite_url,
                                                          monkeypatch):
    from gpuradar.storage.db import open_database

    monkeypatch.setenv("SLACK_TOKEN", SECRET)
    config = tmp_path / "gpuradar.yaml"
    config.write_text("targets:\n  hook: \"" + where.format(port=free_port()) + "\"\n"
                      f"database_url: {sqlite_url}\n")
    env = {"SLACK_TOKEN": SECRET}
    seen: list[str] = []

    # the commands that show targets, and `notify test`'s url and error columns
    for args in (["config", "check"], ["config", "check", "--json"],
                 ["notify", "test", "--timeout", "2"], ["notify", "test", "--json"]):
        proc = gpuradar(*args, config=config, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        seen += [proc.stdout, proc.stderr]
    assert "/hooks" in seen[0]  # the target is shown, only not its secret

    # delivery as the daemon runs it, logging at DEBUG (apprise's "Loaded JSON URL" line)
    cfg = load_config(config)
    REDACT.set_secrets(config_secrets(cfg))
    stream = io.StringIO()
    setup_logging("text", "DEBUG", stream=stream)
    try:
        engine = open_database(sqlite_url)
        fire(engine, ("hook",))
        (result,) = deliver_pending(engine, load_targets(cfg))
    finally:
        setup_logging("text", "WARNING", stream=io.StringIO())
        logging.getLogger().handlers.clear()
        REDACT.set_secrets(())
    assert result.status == "retry" and result.error
    assert "apprise" in stream.getvalue()  # apprise's own lines were there to be masked
    seen += [stream.getvalue(), result.error]
    with engine.connect() as conn:
        seen += [json.dumps([list(r) for r in conn.execute(text(f"SELECT * FROM {table}"))],
                            default=str)
                 for table in ("notification", "alert_state", "crawl")]
    proc = gpuradar("alerts", "--all", config=config, env=env)
    assert proc.returncode == 0, proc.stderr
    seen += [proc.stdout, proc.stderr]

    leaks = [s for s in seen if SECRET in s]
    assert leaks == [], leaks[0][:2000] if leaks else ""
