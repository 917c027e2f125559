"""Start-up figures: the commands a user types most, each a real process, in wall time, in
CPU time, in instructions and in what they import.

Every command runs as the installed `gpuradar` script (what a user's shell starts), with no
configuration file, next to `python -c pass` (the interpreter's own start-up on this
machine, for scale), on one of two data directories (GPURADAR_DATA_DIR): `empty` (a new
database, made by `gpuradar db upgrade`) or `demo` (what `gpuradar demo` stores: every
shipped recording replayed, the data issue #54's targets name).

* Time: the runs are interleaved, one of each command in turn, so a burst of load from
  elsewhere on the machine slows them all alike, and each figure is the median of its runs;
  the CPU time the process used (user + system) is kept too, as it depends far less on that
  load than the wall time. One unmeasured round runs first: Python has then written
  the bytecode of gpuradar's modules, as an installed package has it
  (PYTHONDONTWRITEBYTECODE is not passed on).
* Instructions (`instructions()`): each command once under callgrind (valgrind): the count
  of instructions the process executed is the same from run to run whatever else the
  machine does, so it compares two versions on a loaded machine where times do not.
* Imports (`imports()`): `python -X importtime`'s own time of each module, summed per
  top-level package, and the number of modules: which libraries a command pays for.

`python -m bench.startup [RUNS] [--data empty|demo] [--instructions] [--imports]`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: A small rules file for `gpuradar rules check`: three of the forms users write.
RULES = """rules:
  - H100 under $2/h
  - name: cheap-a100-spot
    rule: 8x A100 spot under $10/h region us-*
  - any 80GB+ GPU under $1.5/h not on vastai
"""

#: (label, arguments of `gpuradar`); the label is what the bench table prints.
COMMANDS: list[tuple[str, list[str]]] = [
    ("gpuradar --version", ["--version"]),
    ("gpuradar --help", ["--help"]),
    ("gpuradar prices", ["prices"]),
    ("gpuradar sources", ["sources"]),
    ("gpuradar rules check", ["rules", "check", "{rules}"]),
]
PYTHON = "python -c pass"
DATA = ("empty", "demo")


def gpuradar_command() -> list[str]:
    """The installed `gpuradar` script next to this interpreter, else `python -m gpuradar`."""
    script = Path(sys.executable).with_name("gpuradar")
    found = str(script) if script.exists() else shutil.which("gpuradar")
    return [found] if found else [sys.executable, "-m", "gpuradar"]


@contextmanager
def commands(data: str = "empty") -> Iterator[tuple[dict[str, list[str]], dict[str, str]]]:
    """({label: argv} with `python -c pass` first, the environment) in a temporary home
    whose data directory is `data` ("empty", or "demo": `gpuradar demo --keep` into it)."""
    if data not in DATA:
        raise ValueError(f"data must be one of {DATA}, not {data!r}")
    with tempfile.TemporaryDirectory(prefix="gpuradar-bench-startup-") as tmp:
        rules = Path(tmp) / "rules.yaml"
        rules.write_text(RULES)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")
               and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")}
        env |= {"GPURADAR_DATA_DIR": str(Path(tmp) / "data"), "COLUMNS": "120",
                "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
        base = gpuradar_command()
        db = Path(tmp) / "data" / "gpuradar.db"
        db.parent.mkdir()
        # a new database at the newest schema (`prices` refuses a missing file: a command
        # that only reads creates none), or the demo's
        setup = ["db", "upgrade"] if data == "empty" else ["demo", "--keep", str(db)]
        done = subprocess.run([*base, *setup], env=env, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise RuntimeError(f"gpuradar {' '.join(setup)} exited {done.returncode}: "
                               f"{done.stderr[-500:]}")
        argvs = {PYTHON: [sys.executable, "-c", "pass"]}
        argvs |= {label: base + [a.format(rules=rules) for a in args]
                  for label, args in COMMANDS}
        yield argvs, env


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process from start to exit; a failed command is an error,
    not a time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # `prices` on an empty database says so and exits 0; any other code is a broken command
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def startup_times(runs: int, data: str = "empty") -> dict[str, dict[str, float]]:
    """label -> {"wall_ms", "cpu_ms"}: the medians over `runs` runs of each command (and of
    `python -c pass`)."""
    with commands(data) as (argvs, env):
        for argv in argvs.values():  # the unmeasured round
            _run(argv, env)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label in argvs}
        for _ in range(runs):
            for label, argv in argvs.items():
                times[label].append(_run(argv, env))
    return {label: {"wall_ms": statistics.median(w for w, _ in values) * 1000,
                    "cpu_ms": statistics.median(c for _, c in values) * 1000}
            for label, values in times.items()}


#: callgrind's summary line on stderr: "==123== Collected : 2226805479"
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def instructions(data: str = "empty", labels: list[str] | None = None) -> dict[str, int]:
    """label -> instructions the process executed (callgrind), once each: the count does
    not depend on the machine's load. About a minute per command on a 2-core machine."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed (Debian: apt-get install valgrind)")
    out: dict[str, int] = {}
    with commands(data) as (argvs, env), tempfile.TemporaryDirectory() as tmp:
        for first in argvs.values():  # bytecode written, database created
            _run(first, env)
        for label, argv in argvs.items():
            if labels is not None and label not in labels and label != PYTHON:
                continue
            proc = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            found = _COLLECTED.search(proc.stderr)
            if proc.returncode != 0 or found is None:
                raise RuntimeError(f"callgrind {' '.join(argv)} exited {proc.returncode}: "
                                   f"{proc.stderr[-500:]}")
            out[label] = int(found[1])
    return out


def imports(data: str = "empty", labels: list[str] | None = None
            ) -> dict[str, dict[str, int]]:
    """label -> {top-level package: microseconds spent importing its own modules} of one
    run under `python -X importtime` (PYTHONPROFILEIMPORTTIME: each module's self time,
    summed per package, so the figures add up), with "(modules)" the number of modules
    imported: the evidence of what a command loads."""
    out: dict[str, dict[str, int]] = {}
    with commands(data) as (argvs, env):
        for label, argv in argvs.items():
            if label == PYTHON or (labels is not None and label not in labels):
                continue
            _run(argv, env)
            proc = subprocess.run(argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
            roots: dict[str, int] = {}
            modules = 0
            for line in proc.stderr.splitlines():
                if not line.startswith("import time:") or "self [us]" in line:
                    continue
                own, _, name = line.split("|", 2)
                modules += 1
                root = name.strip().split(".")[0]
                roots[root] = roots.get(root, 0) + int(own.removeprefix("import time:"))
            out[label] = {"(modules)": modules, **roots}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="?", type=int, default=5)
    ap.add_argument("--data", choices=DATA, default="empty")
    ap.add_argument("--instructions", action="store_true", help="count with callgrind")
    ap.add_argument("--imports", action="store_true", help="python -X importtime")
    args = ap.parse_args(argv)
    for name, t in startup_times(args.runs, args.data).items():
        print(f"{t['wall_ms']:8.0f} ms wall {t['cpu_ms']:8.0f} ms CPU  {name}")
    if args.instructions:
        for name, n in instructions(args.data).items():
            print(f"{n:>15,} instructions  {name}")
    if args.imports:
        for name, roots in imports(args.data).items():
            top = sorted(((v, k) for k, v in roots.items() if k != "(modules)"), reverse=True)
            print(f"{name}: {roots['(modules)']} modules; " + ", ".join(
                f"{k} {v / 1000:.0f} ms" for v, k in top[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
