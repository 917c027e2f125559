"""Whether a path given to gpuradar is a plain file it may read or replace. A symbolic
link's target may be anywhere (/dev/zero, another user's file), and a FIFO or a device
blocks or never ends: each is named for what it is, before anything is opened."""

from __future__ import annotations

import stat
from pathlib import Path


def not_a_file(path: Path) -> str | None:
    """Why `path` is not a regular file ("missing", "a symbolic link ...", "a named pipe,
    not a regular file", ...); None when it is one."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if not stat.S_ISREG(mode):
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a device or socket"
        return f"{kind}, not a regular file"
    return None
