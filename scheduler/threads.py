"""Blocking work awaited from the daemon's event loop (rule evaluation, delivery, database
checks), shared by the lifecycle (daemon.py) and the leader election (leadership.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Run blocking `fn` in a daemon thread and await its result from the loop. Unlike the
    default executor, a call stuck in a dead SMTP server cannot hold up the process's exit."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def work() -> None:
        outcome: tuple[bool, Any]
        try:
            outcome = (True, fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, daemon=True, name=getattr(fn, "__name__", "work")).start()
    return fut
