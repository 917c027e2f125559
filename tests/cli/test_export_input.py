"""`gpuradar export` and `export --verify` given bad directories and tampered manifests: one
line naming what and where, the documented exit code (2 cannot export, 1 a check found
problems), no traceback, and nothing read or written outside the directory."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from gpuradar.storage.export import FORMAT_VERSION
from tests.clirun import gpuradar
from tests.storage.test_index import T0, crawl, item


@pytest.fixture
def db(sqlite_url):
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    crawl(engine, "azure", [item("azure", "A", 2.5)], T0 + timedelta(hours=1))
    engine.dispose()
    return sqlite_url


@pytest.fixture
def exported(db, tmp_path):
    out = tmp_path / "set"
    proc = gpuradar("export", str(out), "--format", "csv,jsonl", db_url=db)
    assert proc.returncode == 0, proc.stderr
    return out


def one_line(proc, code: int) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_an_export_file_name_taken_by_a_directory_is_one_line(db, tmp_path):
    (tmp_path / "set" / "offers.csv").mkdir(parents=True)
    line = one_line(gpuradar("export", str(tmp_path / "set"), "--format", "csv", db_url=db), 2)
    assert line == f"error: cannot write {tmp_path / 'set' / 'offers.csv'}: Is a directory"


def test_a_file_given_as_the_directory_is_named(db, tmp_path):
    (tmp_path / "f").write_text("mine\n")
    line = one_line(gpuradar("export", str(tmp_path / "f"), "--format", "csv", db_url=db), 2)
    assert line == f"error: {tmp_path / 'f'} is a file, not a directory: give a directory " \
                   "to export into"
    assert (tmp_path / "f").read_text() == "mine\n"
    line = one_line(gpuradar("export", "--verify", str(tmp_path / "f")), 1)
    assert line == f"{tmp_path / 'f'}: a file, not an export directory"


def test_other_files_stay_and_an_earlier_formats_files_go(db, exported):
    (exported / "notes.txt").write_text("mine\n")
    proc = gpuradar("export", str(exported), "--format", "csv", db_url=db)
    assert proc.returncode == 0, proc.stderr
    assert (exported / "notes.txt").read_text() == "mine\n"
    assert not (exported / "offers.jsonl").exists()  # would contradict the manifest
    # and the command says what it removed
    removed = proc.stdout.strip().splitlines()[-1]
    assert removed.startswith("removed an earlier export's crawls.jsonl, ")
    assert "offers.jsonl" in removed and "notes.txt" not in proc.stdout
    assert gpuradar("export", "--verify", str(exported)).returncode == 0


def test_an_unlisted_export_file_is_reported(exported):
    (exported / "offers.parquet").write_bytes(b"PAR1 not from this export")
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line == f"{exported / 'offers.parquet'}: an export file manifest.json does not list"


def _tamper(directory, change) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda m: m["files"][0].update(path="../outside.csv"),
     "files[0] path '../outside.csv' is not a file name in the export directory"),
    (lambda m: m["files"][0].update(path="/etc/hostname"),
     "files[0] path '/etc/hostname' is not a file name in the export directory"),
    (lambda m: m["files"][0].update(path=".."), "files[0] path '..' is not a file name"),
    (lambda m: m["files"][1].update(path=None), "files[1] path None is not a file name"),
    (lambda m: m["files"][0].pop("sha256"), "files[0] sha256 None is not 64 hex digits"),
    (lambda m: m["files"][0].update(sha256="xyz"), "files[0] sha256 'xyz' is not 64 hex"),
    (lambda m: m["files"].__setitem__(0, 5), "files[0] is not an object"),
    (lambda m: m.update(files="abc"), "no list of files"),
    (lambda m: m.pop("files"), "no list of files"),
])
def test_a_tampered_manifest_is_one_line_and_reads_nothing_outside(exported, change, problem):
    outside = exported.parent / "outside.csv"
    outside.write_text("not part of the export\n")
    _tamper(exported, change)
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line.startswith(f"{exported / 'manifest.json'}: unreadable manifest ({problem}")
    assert "outside.csv: sha256" not in line and "hostname: sha256" not in line


def test_a_manifest_that_is_not_an_object_is_one_line(exported):
    (exported / "manifest.json").write_text("[]")
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line == f"{exported / 'manifest.json'}: unreadable manifest (no list of files)"


def test_an_edited_digest_and_a_missing_file_are_each_named(exported):
    _tamper(exported, lambda m: m["files"][0].update(sha256="0" * 64))
    (exported / "crawls.jsonl").unlink()
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line == (f"{exported / 'offers.csv'}: sha256 "
                    f"{line.split('sha256 ')[1][:16]}… does not match the manifest's "
                    "0000000000000000… (and 1 more)")


@pytest.mark.parametrize("name", ["offers.csv", "manifest.json"])
def test_a_symbolic_link_in_the_directory_is_not_written_through(db, tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("outside the export\n")
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / name).symlink_to(victim)
    line = one_line(gpuradar("export", str(tmp_path / "set"), "--format", "csv", db_url=db), 2)
    assert line == (f"error: {tmp_path / 'set' / name} is a symbolic link: an export writes "
                    "plain files into its directory; remove the link")
    assert victim.read_text() == "outside the export\n"


def test_verify_does_not_read_through_a_symbolic_link(exported):
    outside = exported.parent / "outside.csv"
    outside.write_bytes((exported / "offers.csv").read_bytes())  # same digest, elsewhere
    (exported / "offers.csv").unlink()
    (exported / "offers.csv").symlink_to(outside)
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line == f"{exported / 'offers.csv'}: a symbolic link (an export holds plain files)"


# -- round four (issue 49): a manifest that lies, or is not a file -------------------------
def _edit(exported, change) -> None:
    path = exported / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(("change", "expected"), [
    (lambda m: m["files"][0].update(rows=999), "holds 1 rows, manifest.json says 999 "
                                               "(the file's entry)"),
    (lambda m: m["tables"]["offers"].update(rows=999), "holds 1 rows, manifest.json says 999 "
                                                       "(table offers)"),
    (lambda m: m.update(format_version=99), "unreadable manifest (format_version 99; this "
                                            f"gpuradar reads {FORMAT_VERSION})"),
    (lambda m: m["files"].append(dict(m["files"][0])), "listed twice in manifest.json"),
])
def test_verify_finds_a_manifest_that_lies(exported, change, expected):
    _edit(exported, change)
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert expected in line, line


def test_verify_names_the_files_it_does_not_check(exported):
    (exported / "notes.txt").write_text("mine\n")
    proc = gpuradar("export", "--verify", str(exported))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{exported}: every file matches manifest.json",
                                        "not in manifest.json, not checked: notes.txt"]


def test_a_manifest_that_is_a_link_to_an_endless_file_is_not_read(exported):
    (exported / "manifest.json").unlink()
    (exported / "manifest.json").symlink_to("/dev/zero")
    line = one_line(gpuradar("export", "--verify", str(exported), timeout=30), 1)
    assert line == f"{exported / 'manifest.json'}: unreadable manifest (a symbolic link (an " \
                   "export holds plain files))"


def test_a_huge_manifest_is_refused_unread(exported):
    (exported / "manifest.json").write_text(" " * (1024 * 1024 + 1))
    line = one_line(gpuradar("export", "--verify", str(exported)), 1)
    assert line.endswith("unreadable manifest (larger than 1024 KiB; an export's is a few "
                         "kilobytes)")


def test_a_fifo_in_place_of_an_export_file_is_named_so(exported):
    import os

    (exported / "offers.csv").unlink()
    os.mkfifo(exported / "offers.csv")
    line = one_line(gpuradar("export", "--verify", str(exported), timeout=30), 1)
    assert line.startswith(f"{exported / 'offers.csv'}: a named pipe, not a regular file")
