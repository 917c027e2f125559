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


def main(sources: list[str]) -> int:
    with ProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        endpoints = serve_standard(server)
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump({"endpoints": endpoints, "scrapy": {"DOWNLOAD_DELAY": 0},
                                       "sources": {s: {"enabled": True} for s in sources}}))
        out = Path(tmp) / "rec"
        env = dict(os.environ, GPURADAR_DATABASE_URL=f"sqlite:///{tmp}/rec.db")
        names = sources or sorted({k.split(".")[0] for k in endpoints})
        proc = subprocess.run([sys.executable, "-m", "gpuradar.cli", "crawl", "--config",
                               str(cfg), "--record", str(out), *names], env=env)
        for name in names:
            if (out / name).exists():
                shutil.rmtree(RECORDINGS / name, ignore_errors=True)
                shutil.copytree(out / name, RECORDINGS / name)
                print(f"recorded {name}")
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
