"""`make mutation`: run cosmic-ray over each target of mutation/targets.toml and print the
score per target (killed / (killed + survived); mutants excluded by operator are not
counted). Survivors that are equivalent mutants are listed, with the reason, in
mutation/equivalent.toml and counted as killed.

    python mutation/run.py [TARGET ...]      # all targets by default
    python mutation/run.py --report          # scores of the last runs, no new run

cosmic-ray writes each mutant into the working tree and restores it afterwards: run it in a
clean checkout you are not editing.
"""

from __future__ import annotations

import argparse
import shlex
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent


def config_for(name: str, target: dict, defaults: dict) -> Path:
    missing = [t for t in target["tests"] if not (REPO / t).exists()]
    if missing:  # a renamed test file would silently weaken the target: say so instead
        sys.exit(f"mutation/targets.toml: target {name!r} names missing tests: {missing}")
    tests = " ".join(shlex.quote(t) for t in target["tests"])
    pytest = target.get("pytest", defaults["pytest"])  # a target may deselect slow tests
    command = f"{shlex.quote(sys.executable)} -m pytest {pytest} {tests}"
    lines = [
        "[cosmic-ray]",
        f"module-path = {target['modules']!r}".replace("'", '"'),
        f"timeout = {defaults['timeout']}",
        "excluded-modules = []",
        f"test-command = {command!r}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        "exclude-operators = [" + ", ".join(f"'{p}'" for p in defaults["exclude-operators"])
        + "]",
    ]
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(name: str, target: dict, defaults: dict) -> None:
    cfg = config_for(name, target, defaults)
    session = RESULTS / f"{name}.sqlite"
    session.unlink(missing_ok=True)
    subprocess.run([BIN / "cosmic-ray", "init", cfg, session], cwd=REPO, check=True)
    subprocess.run([BIN / "cr-filter-operators", session, cfg], cwd=REPO, check=True)
    subprocess.run([BIN / "cosmic-ray", "exec", cfg, session], cwd=REPO, check=True)


def equivalents() -> set[tuple[str, str, int, int]]:
    path = HERE / "equivalent.toml"
    if not path.exists():
        return set()
    data = tomllib.loads(path.read_text())
    return {(e["module"], e["operator"], e["line"], e["occurrence"])
            for e in data.get("mutant", [])}


def score(name: str) -> tuple[int, int, list[tuple]] | None:
    session = RESULTS / f"{name}.sqlite"
    if not session.exists():
        return None
    db = sqlite3.connect(session)
    rows = db.execute(
        "select s.module_path, s.operator_name, s.start_pos_row, s.occurrence, "
        "r.test_outcome from work_results r join mutation_specs s on r.job_id = s.job_id "
        "where r.test_outcome in ('KILLED', 'SURVIVED')").fetchall()
    equivalent = equivalents()
    killed = sum(1 for r in rows if r[4] == "KILLED" or tuple(r[:4]) in equivalent)
    survivors = [r[:4] for r in rows if r[4] == "SURVIVED" and tuple(r[:4]) not in equivalent]
    return killed, len(rows), survivors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--report", action="store_true", help="print the last scores only")
    args = ap.parse_args(argv)
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    names = args.targets or list(spec["targets"])
    if not args.report:
        for name in names:
            run(name, spec["targets"][name], spec["defaults"])
    total_killed = total = 0
    for name in names:
        result = score(name)
        if result is None:
            print(f"{name:16} not run")
            continue
        killed, count, survivors = result
        total_killed, total = total_killed + killed, total + count
        print(f"{name:16} {killed:4}/{count:<4} killed ({killed / max(count, 1):.0%})")
        for module, op, line, occ in survivors:
            print(f"    survived: {module}:{line} {op} #{occ}")
    if total:
        print(f"{'all':16} {total_killed:4}/{total:<4} killed ({total_killed / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
