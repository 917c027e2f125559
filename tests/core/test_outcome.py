"""A crawl's outcome, decided once (gpuradar.core.outcome): what each thing a crawl saw makes
of its status and error line. The storage pipeline only gathers these facts
(tests/crawler/test_mutation_pipelines.py drives it through a crawler)."""

from __future__ import annotations

import pytest

from gpuradar.core.outcome import (
    CrawlSeen,
    CrawlStatus,
    crawl_outcome,
    held_outcome,
    shrink_hold,
    stored_outcome,
)


def test_a_clean_finished_crawl_is_ok_even_with_redirects():
    seen = CrawlSeen("finished", http_statuses={200: 3, 301: 1, 304: 2}, stored=True)
    assert crawl_outcome(seen) == (CrawlStatus.OK, "")
    assert crawl_outcome(seen)[0] == "ok"  # the text stored and shown


@pytest.mark.parametrize("stored, status", [(True, CrawlStatus.PARTIAL),
                                            (False, CrawlStatus.FAILED)])
def test_errors_make_it_partial_when_offers_were_stored_else_failed(stored, status):
    seen = CrawlSeen("finished", spider_errors=("KeyError: 'price' (https://x/a)",),
                     http_statuses={200: 1, 503: 2}, ignored=2, gave_up=1,
                     logged=("Spider error processing <GET https://x/a>",
                             "eastus: the page has no prices", "eastus: the page has no prices"),
                     stored=stored)
    assert crawl_outcome(seen) == (status, "KeyError: 'price' (https://x/a); 2 response(s) "
                                   "with HTTP 503; gave up after retries on 1 request(s); "
                                   "eastus: the page has no prices")


@pytest.mark.parametrize("reason", ["closespider_timeout", "cancelled (not the leader any more)",
                                    "shutdown"])
def test_a_crawl_that_did_not_finish_on_its_own_failed_whatever_it_stored(reason):
    seen = CrawlSeen(reason, http_statuses={429: 1}, stored=True)
    assert crawl_outcome(seen) == (
        CrawlStatus.FAILED, f"crawl stopped early: {reason}; 1 response(s) with HTTP 429")


def test_an_ignored_error_response_alone_is_not_ok():
    assert crawl_outcome(CrawlSeen("finished", ignored=1, stored=True)) == (
        CrawlStatus.PARTIAL, "")


# -- what storage alone knows (CrawlWriter.finish reads the facts, these decide) -------------
def _stored(status: CrawlStatus = CrawlStatus.OK, error: str = "", **facts) -> tuple:
    return stored_outcome(status, error, **{"refused": "", "stored": 0, "kept_unreadable": 0,
                                            "listed_before": True, **facts})


def test_a_refused_replay_is_refused_with_why_whatever_the_crawl_saw():
    assert _stored(refused="captured before the newest data", stored=5) == (
        CrawlStatus.REFUSED, "captured before the newest data")


def test_an_empty_answer_from_a_source_that_listed_offers_fails_and_closes_nothing():
    assert _stored() == (CrawlStatus.FAILED, "crawl returned no offers; nothing closed")
    # offers listed with unreadable prices are not an empty answer
    assert _stored(kept_unreadable=2) == (CrawlStatus.OK, "")
    # a source's first crawl may list nothing; a partial one keeps its own error
    assert _stored(listed_before=False) == (CrawlStatus.OK, "")
    assert _stored(CrawlStatus.PARTIAL, "HTTP 500") == (CrawlStatus.PARTIAL, "HTTP 500")


def test_the_shrink_guard_holds_a_large_drop_and_says_how_large():
    hold = shrink_hold(listed=40, gone=60, baseline=100, guard=0.5)
    assert hold is not None and (hold.threshold, hold.held) == (50, 60)
    status, error = held_outcome(hold, "1 response(s) with HTTP 500")
    assert status == CrawlStatus.PARTIAL
    assert error == ("shrink guard: listed 40 offers, the last successful crawl listed 100 "
                     "(fewer than 50); 60 missing offer(s) not closed unless the next crawl "
                     "confirms the drop; 1 response(s) with HTTP 500")


@pytest.mark.parametrize("listed, gone, baseline, guard", [
    (50, 50, 100, 0.5),   # at the threshold: believed
    (40, 0, 100, 0.5),    # nothing would close
    (40, 60, None, 0.5),  # no successful crawl before
    (1, 99, 100, 0.0),    # the guard turned off
])
def test_no_hold_when_the_drop_is_believable_or_nothing_would_close(listed, gone, baseline,
                                                                    guard):
    assert shrink_hold(listed=listed, gone=gone, baseline=baseline, guard=guard) is None
