"""A crawl's status, and the one decision of it from what the crawl saw.

Pure: no Scrapy, no database. The storage pipeline gathers what a crawl saw (CrawlSeen) and
asks `crawl_outcome`; storage may then only make it stricter for what it alone knows, as
`stored_outcome` and `shrink_hold` decide from the facts it reads (a replay it refused, an
empty answer from a source that listed offers, a shrink it holds)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class CrawlStatus(StrEnum):
    """As stored in the crawl table and shown everywhere (a str: compares with the text)."""

    RUNNING = "running"
    OK = "ok"            # finished, nothing went wrong: it may close the offers it missed
    PARTIAL = "partial"  # finished with errors but stored offers: it closes nothing
    FAILED = "failed"    # stopped early, cancelled, or stored nothing: it closes nothing
    # a replay of a capture older than the stored data (storage decides it): nothing stored,
    # and no failure of the source (its freshness and back-off stay as they were)
    REFUSED = "refused"


#: HTTP statuses that are not an error of the crawl.
FINE_HTTP = frozenset({200, 201, 204, 301, 302, 304, 307, 308})


@dataclass(frozen=True)
class CrawlSeen:
    """What one crawl saw, as its stats and pipelines counted it."""

    finish_reason: str                 # Scrapy's: "finished", "closespider_timeout", ...
    spider_errors: tuple[str, ...] = ()  # callbacks that raised ("message (url)")
    http_statuses: Mapping[int, int] = field(default_factory=dict)  # status -> responses
    ignored: int = 0                   # error responses the spider did not handle
    gave_up: int = 0                   # requests given up after their retries
    logged: tuple[str, ...] = ()       # error lines logged during the crawl, in order
    stored: bool = False               # it stored at least one offer


def crawl_outcome(seen: CrawlSeen) -> tuple[CrawlStatus, str]:
    """(status, error) of a crawl: failed when it did not finish on its own; otherwise ok
    when nothing went wrong, partial when something did but offers were stored, failed when
    nothing was. The error lists every problem once, in one line each."""
    errors = list(seen.spider_errors)
    errors += [f"{count} response(s) with HTTP {status}"
               for status, count in sorted(seen.http_statuses.items())
               if status not in FINE_HTTP]
    if seen.gave_up:
        errors.append(f"gave up after retries on {seen.gave_up} request(s)")
    logged = [m for m in seen.logged if not m.startswith("Spider error")]
    errors.extend(dict.fromkeys(logged))  # download errors, spiders' own error reports
    if seen.finish_reason != "finished":
        return CrawlStatus.FAILED, "; ".join(
            [f"crawl stopped early: {seen.finish_reason}", *errors])
    if seen.spider_errors or seen.ignored or seen.gave_up or logged:
        return (CrawlStatus.PARTIAL if seen.stored else CrawlStatus.FAILED), "; ".join(errors)
    return CrawlStatus.OK, ""


def stored_outcome(status: CrawlStatus, error: str, *, refused: str, stored: int,
                   kept_unreadable: int, listed_before: bool) -> tuple[CrawlStatus, str]:
    """(status, error) made stricter for what storage alone knows when it records a crawl:
    a replay it refused is refused, with why (not a failure of the source); an ok crawl
    that read nothing from a source that listed offers fails (a broken source, not a market
    that emptied in one go)."""
    if refused:
        return CrawlStatus.REFUSED, refused
    if status == CrawlStatus.OK and not stored and not kept_unreadable and listed_before:
        return CrawlStatus.FAILED, error or "crawl returned no offers; nothing closed"
    return status, error


@dataclass(frozen=True)
class ShrinkHold:
    """A drop the shrink guard holds: the missing offers stay open until confirmed."""

    listed: int      # offers this crawl listed
    baseline: int    # offers the last successful crawl listed
    threshold: int   # fewest offers believed without confirmation
    held: int        # open offers this crawl did not list, left open

    def reason(self) -> str:
        return (f"shrink guard: listed {self.listed} offers, the last successful crawl "
                f"listed {self.baseline} (fewer than {self.threshold}); {self.held} missing "
                "offer(s) not closed unless the next crawl confirms the drop")


def shrink_hold(*, listed: int, gone: int, baseline: int | None,
                guard: float) -> ShrinkHold | None:
    """The hold of an ok crawl that lists fewer than `guard` x the last successful crawl's
    `baseline` offers and would close `gone` ones; None when there is nothing to hold or
    the guard is off (0). Storage lifts it when the crawl before held the same drop."""
    if not gone or guard <= 0 or not baseline or listed >= guard * baseline:
        return None
    return ShrinkHold(listed, baseline, math.ceil(guard * baseline), gone)


def held_outcome(hold: ShrinkHold, error: str) -> tuple[CrawlStatus, str]:
    """An ok crawl whose missing offers are held: partial, the hold said first."""
    return CrawlStatus.PARTIAL, f"{hold.reason()}; {error}" if error else hold.reason()
