"""Regenerate the recordings shipped for `gpuradar demo` (gpuradar/recordings/) from the
fixtures, by crawling the fixture server with `gpuradar crawl --record`.

    python -m tests.make_recordings [SOURCE...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.provider_server import ProviderServer, serve_standard

RECORDINGS = Path(__file__).parent.parent / "gpuradar" / "recordings"
# Source options a recording run needs: a dummy key (the fixture server takes any), and no
# signed AWS calls (the demo has no credentials to replay them with).
OPTIONS = {"gcp": {"api_key": "recording-dummy-key"}, "aws": {"spot_history": False},
           "tencent": {"secret_id": "recording-dummy-id", "secret_key": "recording-dummy-key"},
           "huawei": {"access_key": "recording-dummy-ak", "secret_key": "recording-dummy-sk"},
           "autodl": {"web_token": "recording-dummy-token", "dev_token": "recording-dummy-token"}}


def main(sources: list[str]) -> int:
    with ProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        endpoints = serve_standard(server)
        names = sources or sorted({k.split(".")[0] for k in endpoints})
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump({"endpoints": endpoints, "scrapy": {"DOWNLOAD_DELAY": 0},
                                       "sources": {s: {"enabled": True, **OPTIONS.get(s, {})}
                                                   for s in names}}))
        out = Path(tmp) / "rec"
        env = dict(os.environ, GPURADAR_DATABASE_URL=f"sqlite:///{tmp}/rec.db")
        proc = subprocess.run([sys.executable, "-m", "gpuradar", "crawl", "--config",
                               str(cfg), "--record", str(out), *names], env=env)
        for name in names:
            if (out / name).exists():
                shutil.rmtree(RECORDINGS / name, ignore_errors=True)
                shutil.copytree(out / name, RECORDINGS / name)
                print(f"recorded {name}")
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
