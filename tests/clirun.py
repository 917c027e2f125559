"""Running the real `gpuradar` command in a subprocess, as a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml


def write_config(path: Path, **sections: Any) -> Path:
    path.write_text(yaml.safe_dump(sections))
    return path


def _env(db_url: str | None, config: Path | None, env: dict[str, str] | None) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    full_env["GPURADAR_DATA_DIR"] = full_env.get("TMPDIR", "/tmp") + "/gpuradar-test-data"
    if db_url:
        full_env["GPURADAR_DATABASE_URL"] = db_url
    if config:
        full_env["GPURADAR_CONFIG"] = str(config)
    full_env.update(env or {})
    return full_env


def gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
             env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuradar", *args], capture_output=True,
                          text=True, env=_env(db_url, config, env), timeout=timeout)


def start_gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
                   env: dict[str, str] | None = None) -> subprocess.Popen:
    """`gpuradar` started in the background (its output read with `communicate`)."""
    return subprocess.Popen([sys.executable, "-m", "gpuradar", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(db_url, config, env))


def gpuradar_json(*args: str, **kwargs: Any) -> Any:
    proc = gpuradar(*args, "--json", **kwargs)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
