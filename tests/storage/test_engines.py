"""The process's engines (gpuradar.storage.db.Engines): one per URL until forgotten, and
what was made per engine (the alert Evaluator, the Delivery) forgotten with it."""

from __future__ import annotations

import gc
import weakref

from gpuradar.storage.db import Engines, PerEngine


class _Holds:
    """Made per engine and holding it, as the alert Evaluator and Delivery do."""

    def __init__(self, engine: object) -> None:
        self.engine = engine


def test_forgetting_an_engine_frees_it_and_what_was_made_for_it(tmp_path):
    engines, made = Engines(), PerEngine(_Holds)
    first, second = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    engine = engines.get(first)
    holder = made.get(engine)
    assert made.get(engine) is holder and engines.get(first) is engine  # one per engine
    kept = engines.get(second)
    gone = weakref.ref(engine)
    del engine, holder

    engines.forget([first])
    gc.collect()
    assert gone() is None  # the object made for it no longer keeps it alive
    assert engines.urls() == {second} and engines.get(second) is kept
    assert engines.get(first) is not None  # made again at its next use

    engines.forget()
    assert engines.urls() == set()
