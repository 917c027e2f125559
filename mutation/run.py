"""`make mutation`: run cosmic-ray over each target of mutation/targets.toml and print the
score per target (killed / (killed + survived); mutants excluded by operator are not
counted). Survivors that are equivalent mutants are listed, with the reason, in
mutation/equivalent.toml and counted as killed.

    python mutation/run.py [TARGET ...]      # all targets by default
    python mutation/run.py --report          # scores of the last runs, no new run
    python mutation/run.py --stale           # equivalent.toml entries that name no mutant

Each mutant runs only the tests that execute its line (mutation/affected.py, from one coverage
run of the target's tests); `--recheck` runs the last run's survivors against all of them. A
target with `sample = N` (or `--sample N`) runs a random N of its mutants (a new sample
per run: cosmic-ray names its mutants afresh at each init).

cosmic-ray writes each mutant into the working tree and restores it afterwards: run it in a
clean checkout you are not editing (the selection reads the mutant from `git diff`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent


def pytest_args(target: dict, defaults: dict) -> list[str]:
    """The target's pytest options and tests (a target may deselect slow tests)."""
    return [*shlex.split(target.get("pytest", defaults["pytest"])), *target["tests"]]


def config_for(name: str, target: dict, defaults: dict) -> Path:
    missing = [t for t in target["tests"] if not (REPO / t.split("::")[0]).exists()]
    if missing:  # a renamed test file would silently weaken the target: say so instead
        sys.exit(f"mutation/targets.toml: target {name!r} names missing tests: {missing}")
    coverage = RESULTS / f"{name}.coverage"
    command = shlex.join([sys.executable, str(HERE / "affected.py"), str(coverage), "--",
                          *pytest_args(target, defaults)])
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.toml"
    path.write_text(cosmic_ray_config(target["modules"], command, defaults,
                                      defaults["exclude-operators"]))
    return path


def cosmic_ray_config(modules: list[str], command: str, defaults: dict,
                      exclude_operators: list[str] = ()) -> str:
    """A cosmic-ray session configuration (TOML) for these modules and test command."""
    lines = [
        "[cosmic-ray]",
        f"module-path = {json.dumps(modules)}",
        f"timeout = {defaults['timeout']}",
        "excluded-modules = []",
        f"test-command = {json.dumps(command)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = {json.dumps(list(exclude_operators))}",
    ]
    return "\n".join(lines) + "\n"


def texts(modules: list[str]) -> dict[str, str]:
    """The modules' source as the checkout holds it now."""
    return {m: (REPO / m).read_text() for m in modules}


def record_coverage(name: str, target: dict, defaults: dict) -> None:
    """One run of the target's tests, recording which test executes which line; it must
    pass, or no mutant's outcome would mean anything."""
    if subprocess.run(["git", "diff", "--quiet"], cwd=REPO).returncode:
        sys.exit("mutation: the working tree has changes; run in a clean checkout")
    args = [a for a in pytest_args(target, defaults) if a != "-x"]
    sources = sorted({str(Path(m).parent) for m in target["modules"]})
    data = RESULTS / f"{name}.coverage"
    for old in RESULTS.glob(f"{name}.*coverage*"):
        old.unlink()
    # Real subprocesses for the CLI (not forked from tests/forkserver.py): coverage names the
    # test that started each one, which the fork server's children would not carry.
    env = {**os.environ, "COVERAGE_FILE": str(data), "GPURADAR_TEST_SUBPROCESS": "1",
           "MUTATION_DURATIONS": str(data.with_suffix(".durations.json")),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    # Two xdist workers (the suite's files are independent): the coverage run is most of a
    # small sample's time; each worker's contexts are combined as one process's would be.
    code = subprocess.run([sys.executable, "-m", "pytest", *args, "-n", "2", "--dist=loadfile",
                           "-p", "plugin",
                           "--cov-context=test", f"--cov-config={HERE / 'coveragerc'}",
                           "--cov-report=", *(f"--cov={s}" for s in sources)],
                          cwd=REPO, env=env).returncode
    if code:
        sys.exit(f"mutation: the tests of target {name!r} fail without any mutant (exit {code})")


def data_lines(target: dict) -> dict[str, set[int]]:
    """Lines of the target's data tables (`data = ["NAME", ...]`: module-level assignments):
    datasheet facts, not logic. A mutant there (80 GB -> 79 GB) asks whether a test restates
    the table; such mutants are left out of the run and the score, and said so."""
    names = set(target.get("data", ()))
    lines: dict[str, set[int]] = {}
    for module in target["modules"] if names else ():
        for node in ast.parse((REPO / module).read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
                lines.setdefault(module, set()).update(span)
    return lines


def skip_data(session: Path, target: dict) -> None:
    table = data_lines(target)
    if not table:
        return
    db = sqlite3.connect(session)
    jobs = [j for j, module, line in db.execute(
        "select job_id, module_path, start_pos_row from mutation_specs where job_id not in "
        "(select job_id from work_results)") if line in table.get(module, ())]
    db.executemany("insert into work_results (worker_outcome, output, job_id) "
                   "values ('SKIPPED', 'data table', ?)", [(j,) for j in jobs])
    db.commit()


def take_sample(session: Path, size: int) -> None:
    """Keep a random `size` of the mutants; the others are skipped. The seed is fixed, but
    cosmic-ray names the mutants afresh at each init, so every run draws a new sample. A
    sample of n estimates the score within about ±1/sqrt(n)."""
    db = sqlite3.connect(session)
    jobs = [j for (j,) in db.execute(
        "select job_id from work_items where job_id not in (select job_id from work_results) "
        "order by job_id")]
    if size >= len(jobs):
        return
    keep = set(random.Random(0).sample(jobs, size))
    db.executemany("insert into work_results (worker_outcome, output, job_id) "
                   "values ('SKIPPED', 'not in the sample', ?)",
                   [(j,) for j in jobs if j not in keep])
    db.commit()


def run(name: str, target: dict, defaults: dict, sample: int | None = None) -> None:
    cfg = config_for(name, target, defaults)
    session = RESULTS / f"{name}.sqlite"
    session.unlink(missing_ok=True)
    record_coverage(name, target, defaults)
    subprocess.run([BIN / "cosmic-ray", "init", cfg, session], cwd=REPO, check=True)
    (RESULTS / f"{name}.sources.json").write_text(json.dumps(texts(target["modules"])))
    subprocess.run([BIN / "cr-filter-operators", session, cfg], cwd=REPO, check=True)
    skip_data(session, target)
    sample = sample or target.get("sample")
    if sample:
        take_sample(session, sample)
    subprocess.run([BIN / "cosmic-ray", "exec", cfg, session], cwd=REPO, check=True)


def recheck(name: str, target: dict, defaults: dict) -> None:
    """Run each survivor once more against all the target's tests (the selection can miss a
    test that reaches the line only in a subprocess); a mutant they kill is marked killed.
    cosmic-ray applies a mutant by its occurrence in the module as it is now: a module
    edited since the run would get another mutant, so it refuses."""
    session = RESULTS / f"{name}.sqlite"
    now = texts(target["modules"])
    changed = [m for m, text in sources(name, target).items() if now.get(m) != text]
    if changed:
        sys.exit(f"mutation: {', '.join(changed)} changed since the run of {name!r}: "
                 "run it again instead of rechecking")
    db = sqlite3.connect(session)
    equivalent = equivalents()
    where = places(name, target)
    rows = db.execute(
        "select r.job_id, s.module_path, s.operator_name, s.start_pos_row, s.occurrence "
        "from work_results r join mutation_specs s on r.job_id = s.job_id "
        "where r.test_outcome = 'SURVIVED'").fetchall()
    for job, module, operator, line, occurrence in rows:
        if where[job] in equivalent:
            continue
        subprocess.run([BIN / "cosmic-ray", "apply", module, operator, str(occurrence)],
                       cwd=REPO, check=True, capture_output=True)
        try:
            code = subprocess.run([sys.executable, "-m", "pytest",
                                   *pytest_args(target, defaults)], cwd=REPO,
                                  capture_output=True, timeout=defaults["timeout"] * 5
                                  ).returncode
        except subprocess.TimeoutExpired:
            code = -1
        finally:
            subprocess.run(["git", "checkout", "--", module], cwd=REPO, check=True)
        if code:
            db.execute("update work_results set test_outcome = 'KILLED' where job_id = ?",
                       (job,))
            db.commit()
        print(f"recheck {module}:{line} {operator} #{occurrence}: "
              f"{'killed' if code else 'survived'}", flush=True)


Place = tuple[str, str, str, str, int, int]  # module, operator, function, code, nth, index


def sources(name: str, target: dict) -> dict[str, str]:
    """The target's modules as they were when its session was made (saved by `run`; a
    session made before that is read against the checkout, which `run` requires clean)."""
    saved = RESULTS / f"{name}.sources.json"
    if saved.exists():
        return json.loads(saved.read_text())
    return texts(target["modules"])


def places(name: str, target: dict) -> dict[str, Place]:
    """Each mutant of the session (job id) named by where it is rather than by line number
    (see equivalent.toml), from the module text the session was made from."""
    return _places(sqlite3.connect(RESULTS / f"{name}.sqlite"), sources(name, target))


def _places(db: sqlite3.Connection, source: dict[str, str]) -> dict[str, Place]:
    specs = db.execute("select job_id, module_path, operator_name, occurrence, start_pos_row, "
                       "coalesce(definition_name, '') from mutation_specs").fetchall()
    lines = {m: t.split("\n") for m, t in source.items()}
    code = {(m, row): lines[m][row - 1].strip() for _, m, _, _, row, _ in specs}
    on_line: dict[tuple, list[int]] = {}   # (module, operator, row) -> occurrences
    rows_of: dict[tuple, set[int]] = {}    # (module, function, code) -> rows
    for _, module, op, occ, row, fn in specs:
        on_line.setdefault((module, op, row), []).append(occ)
        rows_of.setdefault((module, fn, code[module, row]), set()).add(row)
    index = {(k[0], k[1], occ): i for k, occs in on_line.items()
             for i, occ in enumerate(sorted(occs))}
    nth = {(k[0], k[1], row): i for k, rows in rows_of.items()
           for i, row in enumerate(sorted(rows))}
    return {job: (module, op, fn, code[module, row], nth[module, fn, row],
                  index[module, op, occ])
            for job, module, op, occ, row, fn in specs}


def equivalents() -> set[Place]:
    path = HERE / "equivalent.toml"
    if not path.exists():
        return set()
    data = tomllib.loads(path.read_text())
    return {(e["module"], e["operator"], e["function"], e["code"], e.get("nth", 0), e["index"])
            for e in data.get("mutant", [])}


def stale_equivalents(defaults: dict) -> list[Place]:
    """The entries of equivalent.toml that name no mutant of the modules as they are now
    (the line was edited or removed): each needs a new look."""
    entries = equivalents()
    modules = sorted({e[0] for e in entries})
    with tempfile.TemporaryDirectory() as tmp:
        cfg, session = Path(tmp) / "all.toml", Path(tmp) / "all.sqlite"
        cfg.write_text(cosmic_ray_config(modules, "true", defaults))
        subprocess.run([BIN / "cosmic-ray", "init", cfg, session], cwd=REPO, check=True)
        now = set(_places(sqlite3.connect(session), texts(modules)).values())
    return sorted(entries - now)


def population(name: str, table: dict[str, set[int]]) -> tuple[int, int, int]:
    """(mutants in the sample, mutants of the target after the operator filter, of which in
    data tables)."""
    db = sqlite3.connect(RESULTS / f"{name}.sqlite")
    specs = db.execute("select module_path, start_pos_row from mutation_specs where job_id not "
                       "in (select job_id from work_results where output = 'Filtered operator')"
                       ).fetchall()
    data = sum(1 for module, line in specs if line in table.get(module, ()))
    out = db.execute("select count(*) from work_results where output = 'not in the sample'"
                     ).fetchone()[0]
    return len(specs) - data - out, len(specs) - data, data


def score(name: str, target: dict, table: dict[str, set[int]]
          ) -> tuple[int, int, list[tuple[int, Place]]] | None:
    """(killed or equivalent, mutants run, survivors with their line) of the last run."""
    session = RESULTS / f"{name}.sqlite"
    if not session.exists():
        return None
    db = sqlite3.connect(session)
    rows = [r for r in db.execute(
        "select r.job_id, s.module_path, s.start_pos_row, r.test_outcome from work_results r "
        "join mutation_specs s on r.job_id = s.job_id "
        "where r.test_outcome in ('KILLED', 'SURVIVED')") if r[2] not in table.get(r[1], ())]
    equivalent = equivalents()
    where = places(name, target)
    killed = sum(1 for job, _, _, outcome in rows
                 if outcome == "KILLED" or where[job] in equivalent)
    survivors = [(line, where[job]) for job, _, line, outcome in rows
                 if outcome == "SURVIVED" and where[job] not in equivalent]
    return killed, len(rows), survivors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--report", action="store_true", help="print the last scores only")
    ap.add_argument("--recheck", action="store_true",
                    help="run the last run's survivors against all the target's tests")
    ap.add_argument("--stale", action="store_true",
                    help="list the equivalent.toml entries that name no mutant any more")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="run a random N of each target's mutants (overrides `sample`)")
    args = ap.parse_args(argv)
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    if args.stale:
        stale = stale_equivalents(spec["defaults"])
        for module, op, fn, code, nth, index in stale:
            print(f"stale: {module} {op} function={fn!r} code={code!r} nth={nth} index={index}")
        return 1 if stale else 0
    names = args.targets or list(spec["targets"])
    for name in names if not args.report else ():
        if args.recheck:
            recheck(name, spec["targets"][name], spec["defaults"])
        else:
            run(name, spec["targets"][name], spec["defaults"], args.sample)
    total_killed = total = 0
    for name in names:
        table = data_lines(spec["targets"][name])
        result = score(name, spec["targets"][name], table)
        if result is None:
            print(f"{name:16} not run")
            continue
        killed, count, survivors = result
        total_killed, total = total_killed + killed, total + count
        sampled, mutants, data = population(name, table)
        of = f" (a sample of {sampled} of {mutants} mutants)" if sampled < mutants else ""
        of += f" ({data} mutants of data tables not counted)" if data else ""
        print(f"{name:16} {killed:4}/{count:<4} killed ({killed / max(count, 1):.0%}){of}")
        for line, (module, op, fn, code, nth, index) in survivors:
            print(f"    survived: {module}:{line} {op} function={fn!r} code={code!r} "
                  f"nth={nth} index={index}")
    if total:
        print(f"{'all':16} {total_killed:4}/{total:<4} killed ({total_killed / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
