"""The collector's tunings (gpuradar.core.collector): each puts back what it found."""

from __future__ import annotations

import gc

import pytest

from gpuradar.core.collector import CollectorPause, for_crawls


@pytest.fixture(autouse=True)
def _collector_as_found():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    (gc.enable if was else gc.disable)()
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def test_overlapping_pauses_resume_the_collector_when_the_last_one_ends():
    pause = CollectorPause()
    gc.enable()
    with pause.paused():
        with pause.paused():  # a second evaluation, in another of the daemon's threads
            assert not gc.isenabled() and pause.holders == 2
        assert not gc.isenabled() and pause.holders == 1  # the first still runs
    assert gc.isenabled() and pause.holders == 0


def test_a_pause_leaves_a_collector_the_program_had_turned_off_off():
    pause = CollectorPause()
    gc.disable()
    with pytest.raises(RuntimeError), pause.paused():
        raise RuntimeError("the evaluation failed")
    assert not gc.isenabled() and pause.holders == 0


def test_crawls_collect_the_young_generation_less_often_and_put_the_thresholds_back():
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), for_crawls():
        assert gc.get_threshold() == (10_000, 10, 10)
        assert gc.get_freeze_count() > 0  # what was imported is out of the full passes
        raise RuntimeError("Ctrl-C")
    assert gc.get_threshold() == (700, 10, 10)
