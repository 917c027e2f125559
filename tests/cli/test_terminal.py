"""The command line in a real terminal: an 80 x 24 pseudo-terminal, as a user's shell gives
it (the other CLI tests pipe the output, or set COLUMNS)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(*args: str, columns: int = 80, env: dict[str, str] | None = None,
                timeout: float = 120) -> tuple[int, str]:
    """(exit code, what the terminal received, escapes removed) of `python -m gpuradar ARGS`
    with stdin, stdout and stderr on a pseudo-terminal of `columns` x 24."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("GPURADAR_") and k not in ("COLUMNS", "LINES")}
    full.update({"TERM": "xterm", "PYTHONPATH": str(ROOT),
                 "GPURADAR_DATA_DIR": str(Path(os.environ.get("TMPDIR", "/tmp"))
                                          / f"gpuradar-tty-{os.getpid()}")}, **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "gpuradar", *args], cwd=ROOT, env=full,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed: every process holding it has exited
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return code, ANSI.sub("", text)


def test_an_error_is_one_line_in_an_80_column_terminal(tmp_path):
    """README: "Errors are one line whatever the terminal (never wrapped ...)". In a
    terminal the error console broke a long error into lines of 80 (a path or URL in it
    could no longer be copied whole)."""
    missing = tmp_path.joinpath(*["a-directory-with-a-long-name"] * 3) / "config.yaml"
    code, out = in_terminal("config", "check", str(missing))
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.strip()]
    assert errors == [f"error: config file {missing} does not exist"], out


def test_a_usage_error_is_one_line_too(tmp_path):
    """A missing argument, an unknown option or command, a bad value: Typer printed a usage
    line, a hint and a boxed panel (five lines) where every other error is one."""
    cases = [(["notify", "preview"], "error: Missing argument 'rule'. (see `"),
             (["prices", "--gpux", "H100"], "error: No such option: --gpux (Possible options: "
                                           "--gpu, "),
             (["pricse"], "error: No such command 'pricse'. Did you mean 'prices'"),
             (["prices", "--limit", "x"], "error: Invalid value for '--limit': "),
             (["history", "--days"], "error: Option '--days' requires an argument.")]
    for args, start in cases:
        code, out = in_terminal(*args, env={"GPURADAR_DATABASE_URL":
                                            f"sqlite:///{tmp_path / 'db.sqlite'}"})
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 2, out
        assert len(lines) == 1 and lines[0].startswith(start), out
        assert lines[0].endswith(" --help`)"), out
    # a group without a command still shows its help
    code, out = in_terminal("config")
    assert "Write a starter configuration file, or check one." in out


def test_watch_shows_when_it_refreshed_above_a_table_taller_than_the_terminal(tmp_path):
    """`prices --watch` in a 24-row terminal: Live cut the table at the bottom ("...") and
    the line saying when it refreshed, printed under the table, was never seen; then the
    last row became "..." with no count of what was hidden."""
    from tests.clirun import gpuradar

    db = tmp_path / "demo.db"
    assert gpuradar("demo", "--keep", str(db)).returncode == 0
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")
           and k not in ("COLUMNS", "LINES")}
    env |= {"TERM": "xterm", "PYTHONPATH": str(ROOT), "GPURADAR_DATABASE_URL": f"sqlite:///{db}"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuradar", "prices", "--watch", "1"],
                            cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        # a frame may reach the terminal in several reads: read on until its last line
        # (what it cannot show, counted) has come, not only the first
        while not (b"every 1s, last" in seen and b"shows them" in seen) \
                and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                seen += os.read(master, 65536)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        os.close(master)
    text = ANSI.sub("", seen.decode(errors="replace"))
    assert "every 1s, last" in text and "Ctrl-C stops" in text, text[-2000:]
    # what does not fit is counted (Live cut it to a bare "..." line)
    assert re.search(r"\+\d+ more lines below: a taller terminal or --limit shows them",
                     text), text[-2000:]
    assert not re.search(r"^\s*\.\.\.\s*$", text, re.M), text[-2000:]


# -- a new user's day at 80 x 24 (issue #50) ----------------------------------------------
import pytest  # noqa: E402


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, str]:
    """The README's quick start: `demo --keep demo.db`, then commands on that database."""
    from tests.clirun import gpuradar

    db = tmp_path_factory.mktemp("quick") / "demo.db"
    assert gpuradar("demo", "--keep", str(db)).returncode == 0
    return {"GPURADAR_DATABASE_URL": f"sqlite:///{db}"}


def at_80_columns(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """(exit code, stdout then stderr) of `gpuradar ARGS` at 80 columns, in this process:
    for what a command says, where the terminal itself is not the subject."""
    from tests.clirun import gpuradar

    proc = gpuradar(*args, env={**env, "COLUMNS": "80", "LINES": "24"})
    return proc.returncode, proc.stdout + proc.stderr


def _rows(out: str) -> list[str]:
    """The body of the one table in `out`: the lines between its rule and its blank end."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("───")) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def test_prices_gpu_h100_keeps_region_and_capture_date_at_80_columns(quick_start):
    """`prices --gpu H100` at 80 columns hid region and age first: the capture date the
    quick start promises was gone, and RunPod's community $2.69 and secure $3.29 rows looked
    like duplicates."""
    code, out = in_terminal("prices", "--gpu", "H100", env=quick_start)
    assert code == 0, out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    rows = _rows(out)
    offers = [i for i, line in enumerate(rows) if "$" in line]  # an offer's first line
    from tests.clirun import gpuradar_json

    listed = gpuradar_json("prices", "--gpu", "H100", db_url=quick_start[
        "GPURADAR_DATABASE_URL"])
    assert len(offers) == len(listed) > 15, out
    for i in offers:  # every offer shows when it was seen: its capture date
        assert re.search(r" 2026-08(-\d\d)?\s*$", rows[i]), rows[i]
    # community and secure told apart (by region or instance), on the offer's lines
    runpod = {("community" if "community" in rows[i] + rows[i + 1] else "secure"
               if "secure" in rows[i] + rows[i + 1] else "?"): rows[i]
              for i in offers if "runpod" in rows[i]}
    assert set(runpod) == {"community", "secure"}, out
    assert "$2.6900" in runpod["community"] and "$3.2900" in runpod["secure"]
    assert "seen: a date is the capture date of replayed data" in out
    assert "148199:1xH100_SXM" in out  # an id without spaces is never cut


def test_sources_shows_last_success_items_and_interval_the_prose_behind_why(quick_start):
    """`sources` spent ~60 lines on "why" prose and hid last success, items and interval."""
    code, out = in_terminal("sources", env=quick_start)
    assert code == 0, out
    head = out[:out.index("───")]  # the header, over one line or two
    words = set(head.split())
    for name in ("interval", "last", "crawl", "items", "success", "freshness"):
        assert name in words, out
    hidden = re.search(r"columns? hidden \(([^)]*)\)", " ".join(out.split()))
    assert not hidden or not {"interval", "items", "last success"} & set(
        hidden[1].split(", ")), out
    assert "ALIBABA_CLOUD_ACCESS_KEY_ID" not in out
    assert "why each is enabled or not, what a key adds: --why" in out
    code, why = in_terminal("sources", "--why", env=quick_start)
    assert code == 0 and "ALIBABA_CLOUD_ACCESS_KEY_ID" in why, why


def test_history_note_wraps_between_words(quick_start):
    """The "replayed from recordings ..." note under `history --gpu H100` was cut mid-word
    by the terminal ("azu|re")."""
    code, out = in_terminal("history", "--gpu", "H100", env=quick_start)
    assert code == 0, out
    start = out.index("replayed from recordings")
    note = out[start:].strip().splitlines()
    assert len(note) > 1 and all(len(line) <= 80 for line in note), note
    words = " ".join(note).split()
    for source in ("aws", "azure", "lambda", "oci", "runpod", "vastai"):
        assert source in words, note


def _chart_columns(out: str) -> list[str]:
    """The columns of the `history --gpu` chart in `out`, each as its characters top to
    bottom (the plot area right of the price axis)."""
    rows = [re.sub(r"^\s*(\$[\d.]+)?\s[┤│]", "", line)
            for line in out.splitlines() if re.match(r"^\s*(\$[\d.]+)?\s[┤│]", line)]
    width = max(len(r) for r in rows)
    return ["".join(r.ljust(width)[c] for r in rows) for c in range(width)]


def test_history_carries_each_capture_forward_to_now(quick_start):
    """On the quick-start data the cheapest line started at OCI's $10.00 and was a few
    dashes: a replayed offer existed only at its capture instant. A price holds until the
    next observation says otherwise, so from the first capture on the line is unbroken and
    ends, today, at the cheapest price listed; the note says the prices are carried."""
    code, out = at_80_columns("history", "--gpu", "H100", "--days", "130", env=quick_start)
    assert code == 0, out
    columns = _chart_columns(out)
    first = next(i for i, c in enumerate(columns) if c.strip())
    assert all(c.strip() for c in columns[first:]), out  # no gap once a price is known
    ticks = re.findall(r"^\s*(\$[\d.]+) ┤", out, re.M)
    assert ticks[0] != "$10.0000" and ticks[-1] == "$0.4001", out
    assert columns[-1].strip() and columns[-1][-1] != " ", out  # today: the lowest row
    note = " ".join(out[out.index("replayed from recordings"):].split())
    assert note.startswith("replayed from recordings, each price carried forward from its "
                           "capture: aws (captured 2026-08-09)"), note


def test_history_at_a_time_after_a_capture_carries_its_price(quick_start):
    """`history --at 2026-08-25` said "not listed" for Vast.ai's offer captured 2026-08-22
    (its span was the capture instant): the price holds, and the screen says it is a
    capture carried forward. Before the capture it is still not known."""
    offer = ("history", "vastai", "148199:1xH100_SXM", "--pricing", "spot")
    code, out = at_80_columns(*offer, "--at", "2026-08-25", env=quick_start)
    assert code == 0, out
    assert out.split() == ["$0.4001/h", "($0.4001/GPU-h),", "available:", "yes", "carried",
                           "forward", "from", "its", "capture", "of", "2026-08-22"], out
    code, out = at_80_columns(*offer, "--at", "2026-08-21", env=quick_start)
    assert code == 1 and "not listed (or not yet known) at 2026-08-21" in out, out


def test_run_help_cuts_no_word_at_80_columns():
    """`run --help` cut its log-level choices (`<debug|info|warning|err` / `or>`) and an
    environment variable (`[env var: GPURADAR_METRICS_ADDRESS` / `]`) across lines."""
    code, out = in_terminal("run", "--help")
    assert code == 0, out
    assert "GPURADAR_METRICS_ADDRESS]" in out and "GPURADAR_LOG_LEVEL]" in out, out
    assert "debug, info, warning or" in out and "err\n" not in out, out
    for line in out.splitlines():
        assert not re.search(r"│\s+\]\s", line), line  # a bracket alone on a line


def test_recommend_on_the_quick_start_data_says_which_max_age_answers(quick_start):
    """Every `recommend` scenario on the quick-start data ended "no live offer fits: 204
    stale", with no hint of the option that makes it answer."""
    code, out = at_80_columns("recommend", "-p", "7B", "-t", "qlora", env=quick_start)
    assert code == 1, out
    hint = re.search(r"--max-age (\d+d) answers \(the newest data that fits was seen "
                     r"2026-\d\d-\d\d\)", " ".join(out.split()))
    assert hint, out
    code, out = at_80_columns("recommend", "-p", "7B", "-t", "qlora", "--max-age", hint[1],
                            env=quick_start)
    assert code == 0 and "cheapest by hourly price" in out, out


def test_recommend_fits_on_names_the_small_cards_it_ranks(quick_start):
    """"Fits on: 1x 16+ GB", then a ranking of 8 GB cards first: the hardware table skipped
    the sizes under 16 GB that the job does fit on."""
    code, out = at_80_columns("recommend", "-p", "7B", "-t", "qlora", "--budget", "1/h",
                            "--max-age", "1000d", env=quick_start)
    assert code == 0, out
    assert "Fits on: 1x 8+ GB" in out, out
    ranked = [line for line in out.splitlines() if re.match(r"\s+\d+\s+\w+\s", line)]
    assert any(" V520 " in line for line in ranked), out  # AWS's 8 GB V520, $0.1241


def test_demo_into_head_exits_0_quietly():
    """`gpuradar demo | head -3` exited 1 silently (`prices | head` exits 0): the reader
    closing the pipe is not a failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    env |= {"PYTHONPATH": str(ROOT), "GPURADAR_DATA_DIR": str(
        Path(os.environ.get("TMPDIR", "/tmp")) / f"gpuradar-pipe-{os.getpid()}")}
    proc = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"{sys.executable} -m gpuradar demo | head -3"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and len(proc.stdout.splitlines()) == 3, proc
