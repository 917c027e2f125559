"""Delivery through apprise to real receivers on loopback: an aiosmtpd SMTP server, an
http.server webhook receiving apprise `json://` posts, and Slack's payload intercepted with
`responses`. Retries, backoff and the independence of targets, on SQLite and PostgreSQL."""

from __future__ import annotations

import email
import email.policy
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import select

from gpuradar.alerts.delivery import channel_of, deliver_pending, delivery_for, lease_for
from gpuradar.alerts.engine import evaluate
from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.loader import Target, load_targets, parse_targets
from gpuradar.core.config import Config
from gpuradar.storage import alert_store as store
from gpuradar.storage.models import OUTBOX
from tests.alerts.test_alert_engine import crawl, offer
from tests.helpers import SilentServer, free_port

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
SLACK_HOOK = "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx"



class WebhookReceiver:
    """A real HTTP server that records what apprise's json:// plugin posts."""

    def __init__(self, status: int = 200, delay: float = 0.0, hold: bool = False) -> None:
        self.posts: list[dict] = []
        self.status = status
        self.delay = delay  # seconds before answering
        # hold: no answer until release() (a send that lasts as long as the test needs)
        self.released = threading.Event()
        if not hold:
            self.released.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.posts.append({"path": self.path, "json": json.loads(body or b"{}")})
                receiver.released.wait(60)
                time.sleep(receiver.delay)
                try:
                    self.send_response(receiver.status)
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True  # a handler still sleeping does not hold up close
        self.server.block_on_close = False
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str = "hook") -> str:
        return f"json://127.0.0.1:{self.port}/{path}?retry=0"

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def release(self) -> None:
        self.released.set()

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class SmtpReceiver:
    """A real SMTP server (aiosmtpd) on a pre-picked port (port=0 does not work)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.messages: list[email.message.EmailMessage] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802
                receiver.messages.append(email.message_from_bytes(
                    envelope.content, policy=email.policy.default))
                return "250 OK"

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    def url(self) -> str:
        return (f"mailto://127.0.0.1:{self.port}?from=alerts@example.com&to=ops@example.com"
                "&retry=0&cto=2")

    def __enter__(self) -> SmtpReceiver:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()


def fire(engine, targets: tuple[str, ...], text: str = "H100 under $2/h") -> None:
    crawl(engine, [offer("gpu_8x_h100", 1.87), offer("gpu_8x_h100b", 1.95, region="us-west-1")])
    result = evaluate(engine, [parse_rule(text, notify=targets)], now=T0)
    assert result.notifications == len(targets)


def rows(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {r.target: dict(r._mapping) for r in conn.execute(
            select(OUTBOX).order_by(OUTBOX.c.id))}


def test_email_arrives_with_subject_text_and_html(engine):
    with SmtpReceiver() as smtp:
        targets = parse_targets({"oncall-mail": smtp.url()})
        fire(engine, ("oncall-mail",))
        (result,) = deliver_pending(engine, targets)
        assert (result.status, result.channel, result.target) == ("sent", "email", "oncall-mail")
    (msg,) = smtp.messages
    assert msg["Subject"] == "H100 under $2/h — 2 offers from $1.8700/GPU-h"
    assert msg["To"].addresses[0].addr_spec == "ops@example.com"
    assert msg.get_content_type() == "multipart/alternative"
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert "<b>lambda</b> us-east-1" in html and "<b>$1.8700/GPU-h</b>" in html
    assert 'href="https://lambda.example/x"' in html
    # The plain-text part (apprise derives it from the HTML) is a short list per offer, the
    # rule on one line, both prices with their units.
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert lines[0] == "2 offers match “H100 under $2/h”, cheapest $1.8700/GPU-h."
    first = lines.index("- lambda us-east-1 — 8x H100-SXM-80GB, on-demand")
    assert lines[first + 1] == "$1.8700/GPU-h · $14.96/h for 8 GPUs"
    assert lines[first + 2].startswith("available: yes · seen ")
    assert "- lambda us-west-1 — 8x H100-SXM-80GB, on-demand" in lines
    assert "<" not in text and len(lines) < 12
    assert rows(engine)["oncall-mail"]["status"] == "sent"
    assert store.outbox_backlog(engine) == 0


def test_webhook_receives_the_markdown_message(engine):
    with WebhookReceiver() as hook:
        targets = parse_targets({"hook": hook.url()})
        fire(engine, ("hook",))
        (result,) = deliver_pending(engine, targets)
    assert (result.status, result.channel) == ("sent", "webhook")
    (post,) = hook.posts
    assert post["path"] == "/hook"
    assert post["json"]["title"] == "H100 under $2/h — 2 offers from $1.8700/GPU-h"
    assert post["json"]["type"] == "warning"
    message = post["json"]["message"]
    assert "**lambda** us-east-1" in message and "**$1.8700/GPU-h**" in message
    assert "[gpu_8x_h100](https://lambda.example/x)" in message


def test_slack_payload_is_slack_markdown(engine):
    import responses

    targets = parse_targets({"team-slack": SLACK_HOOK})
    fire(engine, ("team-slack",))
    with responses.RequestsMock() as rsps:
        rsps.add(responses.POST, SLACK_HOOK, body="ok", status=200)
        (result,) = deliver_pending(engine, targets)
        payload = json.loads(rsps.calls[0].request.body)
    assert (result.status, result.channel) == ("sent", "slack")
    attachment = payload["attachments"][0]
    assert attachment["title"] == "H100 under $2/h — 2 offers from $1.8700/GPU-h"
    # CommonMark converted to Slack mrkdwn: bold with single stars, links as <url|label>.
    assert "*lambda* us-east-1" in attachment["text"]
    assert "<https://lambda.example/x|gpu_8x_h100>" in attachment["text"]
    assert "**" not in attachment["text"]


def test_smtp_down_then_back_nothing_lost_and_webhook_not_held_up(engine):
    port = free_port()
    with WebhookReceiver() as hook:
        targets = parse_targets({"oncall-mail": SmtpReceiver(port).url(), "hook": hook.url()})
        fire(engine, ("oncall-mail", "hook"))
        now = datetime.now(UTC)
        first = {r.target: r for r in deliver_pending(engine, targets, now=now)}
        assert first["hook"].status == "sent" and len(hook.posts) == 1
        assert first["oncall-mail"].status == "retry"
        assert "127.0.0.1" in first["oncall-mail"].error
        mail = rows(engine)["oncall-mail"]
        assert mail["status"] == "pending" and mail["attempts"] == 1
        assert mail["next_attempt_at"] == now + timedelta(seconds=30)
        # Not due yet: nothing is attempted.
        assert deliver_pending(engine, targets, now=now + timedelta(seconds=10)) == []
        # Still down at the retry: the backoff doubles.
        second = deliver_pending(engine, targets, now=now + timedelta(seconds=31))
        assert [r.status for r in second] == ["retry"]
        assert rows(engine)["oncall-mail"]["next_attempt_at"] == (
            now + timedelta(seconds=31 + 60))
        with SmtpReceiver(port) as smtp:
            third = deliver_pending(engine, targets, now=now + timedelta(seconds=120))
        assert [(r.target, r.status, r.attempts) for r in third] == [("oncall-mail", "sent", 3)]
        assert len(smtp.messages) == 1 and len(hook.posts) == 1
    assert smtp.messages[0]["Subject"] == "H100 under $2/h — 2 offers from $1.8700/GPU-h"
    assert store.outbox_backlog(engine) == 0


def test_a_target_down_for_long_is_tried_at_least_once_an_hour(engine):
    """The backoff doubles from `retry_backoff` (1000 s here) and stops growing at 1 h."""
    targets = parse_targets({"hook": f"json://127.0.0.1:{free_port()}/hook?retry=0"})
    fire(engine, ("hook",))
    at, gaps = datetime.now(UTC), []
    for _ in range(4):
        (result,) = deliver_pending(engine, targets, now=at, retry_backoff=1000, max_attempts=9)
        assert result.status == "retry"
        due = rows(engine)["hook"]["next_attempt_at"]
        gaps.append((due - at).total_seconds())
        at = due
    assert gaps == [1000, 2000, 3600, 3600]


def test_gives_up_after_max_attempts_with_the_error_and_no_secret(engine):
    dead = free_port()
    url = f"json://alerts:s3cr3t-hook-password@127.0.0.1:{dead}/hook?retry=0"
    targets = parse_targets({"hook": url})
    fire(engine, ("hook",))
    now = datetime.now(UTC)
    statuses = []
    for n in range(3):
        results = deliver_pending(engine, targets, now=now + timedelta(hours=n), max_attempts=3)
        statuses += [r.status for r in results]
    assert statuses == ["retry", "retry", "failed"]
    row = rows(engine)["hook"]
    assert row["status"] == "failed" and row["attempts"] == 3
    assert "Connection error" in row["last_error"] and "json://" in row["last_error"]
    assert "s3cr3t" not in row["last_error"]
    assert store.outbox_backlog(engine) == 0
    assert deliver_pending(engine, targets, now=now + timedelta(days=1)) == []


def test_a_failing_target_defers_its_later_messages_but_not_others(engine):
    with WebhookReceiver(status=500) as broken, WebhookReceiver() as good:
        targets = parse_targets({"broken": broken.url(), "good": good.url()})
        crawl(engine, [offer("a", 1.5)])
        rules = [parse_rule("H100 under $2/h", notify=("broken", "good")),
                 parse_rule("H100 under $3/h", notify=("broken", "good"))]
        assert evaluate(engine, rules, now=T0).notifications == 4
        results = deliver_pending(engine, targets)
    by = sorted((r.target, r.status) for r in results)
    assert by == [("broken", "retry"), ("broken", "retry"), ("good", "sent"), ("good", "sent")]
    assert len(broken.posts) == 1          # the second message waited for the retry
    assert len(good.posts) == 2


def test_a_message_given_up_does_not_hold_up_the_next_one_to_that_target(engine):
    """With `max_attempts: 1` each of two messages to a dead target is tried once and
    given up in the same pass."""
    targets = parse_targets({"hook": f"json://127.0.0.1:{free_port()}/hook?retry=0"})
    crawl(engine, [offer("a", 1.5)])
    rules = [parse_rule("H100 under $2/h", notify=("hook",)),
             parse_rule("H100 under $3/h", notify=("hook",))]
    assert evaluate(engine, rules, now=T0).notifications == 2
    results = deliver_pending(engine, targets, max_attempts=1)
    assert [(r.status, r.attempts) for r in results] == [("failed", 1), ("failed", 1)]
    assert store.outbox_backlog(engine) == 0


def test_the_errors_of_a_target_with_many_urls_are_kept_to_2000_characters(engine):
    urls = [f"json://127.0.0.1:{free_port()}/hook{n}?retry=0" for n in range(30)]
    fire(engine, ("many",))
    (result,) = deliver_pending(engine, parse_targets({"many": urls}))
    assert result.status == "retry" and len(result.error) == 2000
    assert rows(engine)["many"]["last_error"] == result.error


def test_a_target_removed_from_the_config_fails_its_rows(engine):
    fire(engine, ("gone",))
    (result,) = deliver_pending(engine, parse_targets({}))
    assert result.status == "failed" and "not configured" in result.error


# -- timeouts ----------------------------------------------------------------------------
def with_send_timeout(seconds: float, **targets: str):
    """Targets as the daemon loads them, with `alerts.send_timeout`."""
    return load_targets(Config(database_url="", targets=targets,
                               alerts={"send_timeout": seconds}))


def test_a_slow_webhook_within_send_timeout_gets_the_message_once(engine):
    """apprise's own read timeout is 4 s: a receiver that answers after 6 s used to get
    the message three times and end `failed`. send_timeout (30 s) bounds the attempt."""
    with WebhookReceiver(delay=6) as hook:
        targets = with_send_timeout(30, hook=hook.url())
        fire(engine, ("hook",))
        (result,) = deliver_pending(engine, targets)
        assert (result.status, result.attempts, result.error) == ("sent", 1, "")
        assert len(hook.posts) == 1
    assert rows(engine)["hook"]["status"] == "sent"


def test_a_webhook_that_never_answers_times_out_after_send_timeout(engine):
    with WebhookReceiver(delay=20) as hook:
        targets = with_send_timeout(2, hook=hook.url())
        fire(engine, ("hook",))
        before = time.monotonic()
        (result,) = deliver_pending(engine, targets)
        assert result.status == "retry" and result.attempts == 1
        assert result.error.endswith("timed out after 2 s")
        assert "Connection error" not in result.error
        assert len(hook.posts) == 1           # one attempt, no hidden retries
        # apprise's worker may go on until its socket timeouts (2 s each) have run out:
        # this engine's Delivery knows until when (a stopping daemon waits for it)
        assert delivery_for(engine).sends_may_run_until() >= before + 2 * 2 + 1
    row = rows(engine)["hook"]
    assert row["status"] == "pending" and row["last_error"].endswith("timed out after 2 s")


def test_a_slow_refusal_within_send_timeout_is_reported_as_the_refusal(engine):
    """A receiver that answers 500 after half a second, within `send_timeout`, did not time
    out: the error names what it answered. (The bound is 10 s, not 1 s: on a loaded machine
    the half-second answer may take longer than a second to be read.)"""
    with WebhookReceiver(status=500, delay=0.5) as hook:
        targets = with_send_timeout(10, hook=hook.url())
        fire(engine, ("hook",))
        (result,) = deliver_pending(engine, targets)
    assert result.status == "retry" and "500" in result.error
    assert "timed out" not in result.error


def test_a_hung_smtp_server_times_out_after_send_timeout_once_per_attempt(engine):
    with SilentServer() as smtp:  # accepts SMTP connections and never greets
        url = (f"mailto://127.0.0.1:{smtp.port}?from=alerts@example.com&to=ops@example.com")
        targets = with_send_timeout(2, mail=url)
        fire(engine, ("mail",))
        now = datetime.now(UTC)
        (first,) = deliver_pending(engine, targets, now=now)
        assert first.status == "retry" and first.error.endswith("timed out after 2 s")
        assert smtp.accepted == 1
        (second,) = deliver_pending(engine, targets, now=now + timedelta(seconds=31))
        assert (second.status, second.attempts) == ("retry", 2)
        assert smtp.accepted == 2


@pytest.mark.parametrize(("url", "channel"), [
    ("slack://T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx", "slack"),
    (SLACK_HOOK, "slack"),
    ("mailtos://user:pw@smtp.example.com:587?to=a@example.com", "email"),
    ("json://127.0.0.1:8080/hook", "webhook"),
    ("form://example.com/hook", "webhook"),
    ("tgram://123456789:abcdefg_hijklmnop/12345/", "other"),
])
def test_channel_of(url, channel):
    assert channel_of(url) == channel


def test_every_message_for_a_target_removed_from_the_config_fails(engine):
    crawl(engine, [offer("a", 1.5)])
    rules = [parse_rule("H100 under $2/h", notify=("gone",)),
             parse_rule("H100 under $3/h", notify=("gone",))]
    assert evaluate(engine, rules, now=T0).notifications == 2
    results = deliver_pending(engine, parse_targets({}))
    assert [r.status for r in results] == ["failed", "failed"]
    assert all("not configured" in r.error for r in results)
    with engine.connect() as conn:
        stored = conn.execute(select(OUTBOX.c.status)).scalars().all()
    assert stored == ["failed", "failed"]


# -- what an error may show, and one pass at a time ------------------------------------------
def test_an_error_quoting_the_url_shows_no_secret_but_keeps_short_words(engine):
    """A sender that fails with the URL's parts in its message (the daemon's fenced sender,
    a plugin bug): a password or a path token of six characters or more becomes ****;
    short path words stay, or the error would be unreadable."""
    url = f"json://ops:pa55wd@127.0.0.1:{free_port()}/v2/hooks/T04KX9ZQ7B2vLr8?retry=0"
    targets = parse_targets({"hook": url})
    fire(engine, ("hook",))

    def failing(*args, **kwargs):
        raise RuntimeError("login ops:pa55wd refused at /v2/hooks/T04KX9ZQ7B2vLr8")

    (result,) = deliver_pending(engine, targets, sender=failing)
    assert result.status == "retry"
    assert result.error == rows(engine)["hook"]["last_error"] == (
        "RuntimeError: login ops:**** refused at /v2/hooks/****")


def test_a_second_delivery_pass_does_not_wait_for_one_already_sending(engine):
    """The daemon starts a pass on a timer: while one is still sending to a slow webhook, the
    next returns at once with nothing done instead of queueing behind it."""
    with WebhookReceiver(hold=True) as hook:  # answers once released: the first pass waits
        targets = parse_targets({"hook": hook.url()})
        fire(engine, ("hook",))
        first: list = []
        sending = threading.Thread(target=lambda: first.extend(deliver_pending(engine, targets)))
        sending.start()
        deadline = time.monotonic() + 20
        while not hook.posts and time.monotonic() < deadline:   # inside the held send
            time.sleep(0.02)
        assert deliver_pending(engine, targets) == []
        still_sending = sending.is_alive()
        hook.release()
        sending.join(30)
    assert still_sending
    assert [r.status for r in first] == ["sent"] and len(hook.posts) == 1


def test_a_message_is_given_up_after_eight_attempts_by_default(engine):
    """docs/alerts.md: `max_attempts` 8 unless configured."""
    targets = parse_targets({"hook": f"json://127.0.0.1:{free_port()}/hook?retry=0"})
    fire(engine, ("hook",))
    now = datetime.now(UTC)
    statuses = [r.status for n in range(9)
                for r in deliver_pending(engine, targets, now=now + timedelta(days=n))]
    assert statuses == ["retry"] * 7 + ["failed"]
    assert rows(engine)["hook"]["attempts"] == 8


def test_a_row_is_reserved_for_every_url_s_attempt_and_a_margin_to_record_it():
    """A send to a target of three URLs may take three timeouts, and the outcome is written
    after: the row's lease covers that (a margin of the timeout, at most 5 s), so no other
    process takes it up while it may still be sent; a one-off send counts one URL."""
    three = Target("team", ("json://a.example/x", "json://b.example/y", "json://c.example/z"))
    assert lease_for(three, 2.0) == timedelta(seconds=3 * 2.0 + 2.0)
    assert lease_for(three, 30.0) == timedelta(seconds=3 * 30.0 + 5.0)
    assert lease_for(None, 10.0) == timedelta(seconds=10.0 + 5.0)
