"""What every provider's tests check the same way, through the real command: its shipped
recording replays into offers dated at the capture, and a changed answer served over real
HTTP fails the crawl as not understood, in one line, keeping every stored offer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuradar.cli.common import RECORDINGS
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.make_recordings import captures, serve_capture
from tests.provider_server import ProviderServer, Reply


def replayed_offers(source: str, db_url: str) -> list[dict[str, Any]]:
    """`gpuradar crawl <source> --replay` of the shipped recording, then its offers."""
    proc = gpuradar("crawl", source, "--replay", str(RECORDINGS), "--json", db_url=db_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] > 0, result
    captured = json.loads((RECORDINGS / source / "provenance.json").read_text())["captured"]
    offers = gpuradar_json("prices", "--source", source, "--limit", "0", db_url=db_url)
    assert offers and all(o["replayed"] and o["captured"] == captured for o in offers)
    return offers


def changed_answer_fails(source: str, server: ProviderServer, tmp_path: Path, db_url: str,
                         path: str, changed: bytes, expected: str) -> None:
    """A first crawl of the real answers stores offers; then `path` answers `changed`: the
    crawl fails with one line naming `expected`, closes nothing and changes no offer."""
    endpoints = serve_capture(server, captures()[source])
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={source: {"request_interval": 0}})
    first = gpuradar("crawl", source, "--json", config=cfg, db_url=db_url)
    assert first.returncode == 0, first.stdout + first.stderr
    before = gpuradar_json("prices", "--source", source, "--limit", "0", db_url=db_url)
    assert before
    content_type = "text/html; charset=utf-8" if changed.lstrip()[:1] == b"<" \
        else "application/json"
    server.route("GET", path, lambda req: Reply(body=changed, content_type=content_type))
    proc = gpuradar("crawl", source, "--json", config=cfg, db_url=db_url)
    assert proc.returncode != 0
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["closed"] == 0, result
    assert expected in result["error"] and "\n" not in result["error"], result["error"]
    assert "HTTP 404" not in result["error"]  # a page site's missing robots.txt is no error
    assert "Traceback" not in proc.stderr
    after = gpuradar_json("prices", "--source", source, "--limit", "0", db_url=db_url)
    assert after == before
