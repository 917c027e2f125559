"""Configuration read once (issue #46): one `crawl --replay` of every recorded source checks
the options the file sets once — when the configuration loads — and never again while it
crawls (it checked them 66 times before: at every `option()` a spider read); a source the
file leaves out has its model's defaults as written, with nothing to check.

The command runs in a spawned child of its own (a crawl installs Twisted's reactor, once per
process), which counts every check of a source's options model and sends the counts back."""

from __future__ import annotations

import multiprocessing
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from tests.daemon_helpers import RECORDINGS, write_config


def _count_crawl(config: str, recordings: str, out: Any) -> None:
    """The child: `gpuradar crawl --replay` with every options check counted by model."""
    import pydantic

    from gpuradar.core.config import SourceOptions

    counts: Counter[str] = Counter()
    init, validate = pydantic.BaseModel.__init__, pydantic.BaseModel.model_validate.__func__

    def counted_init(self: Any, /, **data: Any) -> None:
        if isinstance(self, SourceOptions):
            counts[type(self).__name__] += 1
        init(self, **data)

    def counted_validate(cls: type, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if issubclass(cls, SourceOptions):
            counts[cls.__name__] += 1
        return validate(cls, obj, *args, **kwargs)

    pydantic.BaseModel.__init__ = counted_init  # type: ignore[method-assign]
    pydantic.BaseModel.model_validate = classmethod(counted_validate)  # type: ignore
    from gpuradar.cli import app

    try:
        code = app(["crawl", "--config", config, "--replay", recordings, "--json"],
                   standalone_mode=False)
        out.send(dict(counts) if not code else {"error": f"exit code {code}"})
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        out.send({"error": repr(exc)})


def test_one_replay_of_every_recorded_source_checks_each_sources_options_once(
        tmp_path, sqlite_url):
    recorded = sorted(p.name for p in RECORDINGS.iterdir() if p.is_dir())
    shutil.copytree(RECORDINGS, tmp_path / "recordings")
    # one source configured in the file, the others on their defaults
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": sqlite_url, "sources": {"vastai": {"interval": "10m"}}})
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_count_crawl, args=(str(config), str(tmp_path / "recordings"),
                                                   theirs))
    child.start()
    theirs.close()
    try:
        assert ours.poll(120), "the crawl reported nothing"
        counts = ours.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert "error" not in counts, counts
    from gpuradar.core import providers

    crawled = Path(tmp_path / "recordings")
    assert sorted(p.name for p in crawled.iterdir() if p.is_dir()) == recorded
    # the file's vastai section checked once, at load; every other source's defaults are
    # taken as written in its model (nothing to check: Config.source_options), never checked
    assert "Source_vastai" in {f"Source_{p.name}" for p in providers.PROVIDERS}
    assert counts == {"Source_vastai": 1}, counts
