"""Start-up figures: the wall time of the commands a user types most, each a real process.

Every command runs as the installed `gpuradar` script (what a user's shell starts), in a
fresh temporary data directory (GPURADAR_DATA_DIR) with no configuration file, next to
`python -c pass` (the interpreter's own start-up on this machine, for scale). The runs are
interleaved, one of each command in turn, so a burst of load from elsewhere on the machine
slows them all alike, and each figure is the median of its runs; the CPU time the process
used (user + system) is kept too, as it depends far less on that load than the wall time.
One unmeasured round runs first: `prices` then finds its empty database already created, as
it does every time after the first, and Python has written the bytecode of gpuradar's
modules, as an installed package has it (PYTHONDONTWRITEBYTECODE is not passed on).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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


def gpuradar_command() -> list[str]:
    """The installed `gpuradar` script next to this interpreter, else `python -m gpuradar`."""
    script = Path(sys.executable).with_name("gpuradar")
    found = str(script) if script.exists() else shutil.which("gpuradar")
    return [found] if found else [sys.executable, "-m", "gpuradar"]


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


def startup_times(runs: int) -> dict[str, dict[str, float]]:
    """label -> {"wall_ms", "cpu_ms"}: the medians over `runs` runs of each command (and of
    `python -c pass`)."""
    with tempfile.TemporaryDirectory(prefix="gpuradar-bench-startup-") as tmp:
        rules = Path(tmp) / "rules.yaml"
        rules.write_text(RULES)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")
               and k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"GPURADAR_DATA_DIR": str(Path(tmp) / "data"), "COLUMNS": "120"}
        base = gpuradar_command()
        argvs = {PYTHON: [sys.executable, "-c", "pass"]}
        argvs |= {label: base + [a.format(rules=rules) for a in args]
                  for label, args in COMMANDS}
        for argv in argvs.values():  # the unmeasured round
            _run(argv, env)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label in argvs}
        for _ in range(runs):
            for label, argv in argvs.items():
                times[label].append(_run(argv, env))
    return {label: {"wall_ms": statistics.median(w for w, _ in values) * 1000,
                    "cpu_ms": statistics.median(c for _, c in values) * 1000}
            for label, values in times.items()}


if __name__ == "__main__":
    for name, t in startup_times(int(sys.argv[1]) if len(sys.argv) > 1 else 5).items():
        print(f"{t['wall_ms']:8.0f} ms wall {t['cpu_ms']:8.0f} ms CPU  {name}")
