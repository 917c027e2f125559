"""Delivery under a guard, on SQLite and PostgreSQL (issue #33): what a replica that may not
send any more leaves behind, and how a message in flight is kept from a second sender.
(The replicas themselves: tests/scheduler/test_handover.py.)"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

from gpuradar.alerts.delivery import SendOutcome, Withheld, deliver_pending
from gpuradar.alerts.loader import parse_targets
from gpuradar.storage import alert_store as store
from gpuradar.storage.db import open_database

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
TARGETS = parse_targets({"hook": "json://127.0.0.1:9/hook", "mail": "json://127.0.0.1:9/m"})


def queue(engine, target: str, n: int) -> None:
    store.save_evaluation(engine, inserts=[], updates=[], deletes=[], notifications=[
        {"created_at": T0, "alert_key": f"rule:r{i}", "kind": "firing", "target": target,
         "channel": "webhook", "title": f"{target} {i}", "body_markdown": "m",
         "body_text": "t", "body_html": "h", "notify_type": "info", "status": "pending",
         "attempts": 0, "next_attempt_at": T0} for i in range(n)])


def rows(engine, target: str) -> list[tuple]:
    return [(r["title"], r["status"], r["attempts"], r["next_attempt_at"], r["last_error"])
            for r in sorted(store.notification_log(engine, limit=100), key=lambda r: r["id"])
            if r["target"] == target]


def test_rows_a_guard_withholds_stay_exactly_as_they_were(db_url):
    """A replica that stops, or loses the leader lock, in the middle of a pass: what it
    sent is recorded; the rest is left untouched (no attempt counted, no retry delay), so
    the next leader sends it at once."""
    engine = open_database(db_url)
    queue(engine, "hook", 3)
    sent: list[str] = []
    entered: list[int] = []

    def sender(target, title, *args):
        sent.append(title)
        return SendOutcome(True)

    @contextlib.contextmanager
    def guard():  # lets one message through, then the gate is closed
        entered.append(1)
        if len(entered) > 1:
            raise Withheld("this replica is stopping")
        yield

    results = deliver_pending(engine, TARGETS, now=T0 + timedelta(seconds=1), sender=sender,
                              guard=guard)
    assert [(r.target, r.status) for r in results] == [("hook", "sent")]
    assert sent == ["hook 0"]
    assert len(entered) == 2  # the pass stopped at the first refusal
    hook = rows(engine, "hook")
    assert [h[:3] for h in hook] == [("hook 0", "sent", 1), ("hook 1", "pending", 0),
                                     ("hook 2", "pending", 0)]
    assert [h[3:] for h in hook[1:]] == [(T0, ""), (T0, "")]


def test_a_message_in_flight_is_reserved_and_one_taken_over_is_left_alone(db_url):
    """While one replica sends a message, the row is not due for anyone else (another
    replica that takes over meanwhile leaves it); a row that another replica reserved since
    this pass read it is not sent again by this one."""
    engine = open_database(db_url)
    queue(engine, "hook", 2)
    later = datetime.now(UTC) + timedelta(hours=1)
    seen: list[tuple[str, list[str]]] = []

    def sender(target, title, markdown, html, text, notify_type, timeout):
        now = datetime.now(UTC)
        due = [r["title"] for r in store.due_notifications(engine, now)]
        seen.append((title, due))
        if title == "hook 0":  # meanwhile another replica reserves the next message
            (other,) = [r for r in store.due_notifications(engine, now)]
            assert store.claim_notification(engine, other["id"], other["next_attempt_at"],
                                            later)
        return SendOutcome(True)

    results = deliver_pending(engine, TARGETS, now=T0 + timedelta(seconds=1), sender=sender,
                              timeout=2)
    # while "hook 0" was being sent it was not due for anyone else
    assert seen == [("hook 0", ["hook 1"])]
    assert [(r.id, r.status) for r in results] == [(results[0].id, "sent")]
    hook = rows(engine, "hook")
    assert [h[:3] for h in hook] == [("hook 0", "sent", 1), ("hook 1", "pending", 0)]
    assert hook[1][3] == later  # still the other replica's


def test_a_reservation_covers_every_url_of_the_target_and_runs_out():
    from gpuradar.alerts.delivery import lease_for

    two = parse_targets({"both": ["json://127.0.0.1:9/a", "json://127.0.0.1:9/b"]})
    assert lease_for(TARGETS.get("hook"), 30) == timedelta(seconds=35)
    assert lease_for(two.get("both"), 2) == timedelta(seconds=6)
