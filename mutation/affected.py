"""Test command of a mutation run: run only the tests that execute the mutated line.

cosmic-ray writes one mutant into the working tree and runs this command; `git diff` names
the mutated lines, and the coverage contexts recorded by `run.py` (one pytest run of the
target's tests with `--cov-context=test`) name the tests that execute them. A test that never
reaches the line cannot see the mutant, so leaving it out changes no outcome, only the time
(a target's tests take seconds to minutes; most mutants need a handful of them), and the
quickest of them run first (durations from the same run), since the first failure ends it.

Subprocesses count: the CLI tests run gpuradar in one, and mutation/plugin.py labels their
coverage with the test that started them. A mutant on a line no test reaches survives
without a run. The selection falls back to every test of the target whenever it cannot be
sure: a line run at import (module or class level), or a selection pytest cannot collect.
`run.py --recheck` runs every survivor once more against all the target's tests, for a test
the selection may have missed (a subprocess killed before it saved its coverage).

    python mutation/affected.py COVERAGE_FILE -- PYTEST_ARGS... TESTS...
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from coverage import CoverageData
from coverage.python import PythonParser

REPO = Path(__file__).resolve().parent.parent
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def mutated_lines() -> dict[Path, set[int]]:
    """Lines of the original files that the mutant in the working tree changes."""
    diff = subprocess.run(["git", "diff", "-U0", "--no-color", "--no-ext-diff"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout
    lines: dict[Path, set[int]] = {}
    current: Path | None = None
    for line in diff.splitlines():
        if line.startswith("--- a/"):
            current = REPO / line[6:]
        elif (match := HUNK.match(line)) and current is not None:
            start, count = int(match[1]), int(match[2] if match[2] is not None else 1)
            lines.setdefault(current, set()).update(range(start, start + max(count, 1)))
    return lines


def original_text(path: Path) -> str:
    """The committed text of a file the mutant changed (cosmic-ray mutates a clean tree)."""
    return subprocess.run(["git", "show", f"HEAD:{path.relative_to(REPO).as_posix()}"],
                          cwd=REPO, capture_output=True, text=True, check=True).stdout


def selected_tests(coverage_file: str) -> list[str] | None:
    """Node ids of the tests that run a mutated line; None: run them all."""
    data = CoverageData(coverage_file)
    data.read()
    selected: set[str] = set()
    measured = {Path(f) for f in data.measured_files()}
    changed = {p: lines for p, lines in mutated_lines().items() if p in measured}
    if not changed:  # the mutant is not in a measured file: nothing to go by
        return None
    for path, lines in changed.items():
        # The diff's line numbers and the coverage data are the original file's: parse that,
        # not the mutated file, whose lines a deletion (a removed decorator) has moved.
        parser = PythonParser(text=original_text(path), filename=str(path))
        parser.parse_source()
        by_line = data.contexts_by_lineno(str(path))
        for line in lines:
            contexts = by_line.get(parser.first_line(line), [])
            if "" in contexts:  # run at import: every test depends on it
                return None
            selected.update(c.rsplit("|", 1)[0] for c in contexts)
    timing = Path(coverage_file).with_suffix(".durations.json")
    durations = json.loads(timing.read_text()) if timing.exists() else {}
    return sorted(selected, key=lambda test: (durations.get(test, 0.0), test))


def main(argv: list[str]) -> int:
    coverage_file, rest = argv[0], argv[argv.index("--") + 1:]
    options = [a for a in rest if a.startswith("-") or not a.startswith("tests/")]
    tests = selected_tests(coverage_file)
    command = [sys.executable, "-m", "pytest", *options]
    if tests == []:  # no test reaches the line: it survives (`run.py --recheck` runs it again)
        return 0
    if tests is not None:
        code = subprocess.run([*command, *tests], cwd=REPO).returncode
        if code not in (4, 5):  # 4/5: a node id pytest could not collect: run them all
            return code
    return subprocess.run([*command, *(a for a in rest if a not in options)],
                          cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
