"""A crawl's outcome, decided once (gpuradar.core.outcome): what each thing a crawl saw makes
of its status and error line. The storage pipeline only gathers these facts
(tests/crawler/test_mutation_pipelines.py drives it through a crawler)."""

from __future__ import annotations

import pytest

from gpuradar.core.outcome import CrawlSeen, CrawlStatus, crawl_outcome


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
