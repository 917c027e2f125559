"""High availability: replicas of `gpuradar run` on one real PostgreSQL database elect one
leader (scheduler/leadership.py), as real subprocesses notifying a real SMTP server and a
real webhook receiver. Exactly one crawls, evaluates and delivers; a standby serves
/metrics and /healthz from the shared database; kill -9 and SIGTERM of the leader hand the
work over; a leader that loses its lock stops at once. On SQLite a second daemon refuses
to start. The retry interval is 1 s here (5 s by default)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.daemon_helpers import (
    Daemon,
    LockHolder,
    SmtpSink,
    WebhookSink,
    consistency_problems,
    copy_recordings,
    free_port,
    holder_pid,
    one_leader,
    only_sources,
    query,
    role,
    wait_for,
    write_config,
)
from tests.provider_server import Reply, serve_standard
from tests.routes.core import AZURE_STANDARD_REQUESTS

REPO = Path(__file__).resolve().parents[2]
H100_RULE = "H100 under $100/h on vastai"
SECOND_RULE = "H100 on-demand under $90/h on vastai"  # a second rule on the same offers
FAST = {"jitter": 0}
# takeover_within 10 s: the lock session is dropped after 9 s of silence, far above what a
# loaded test machine delays the leader's 1 s checks
HA = {"leader_retry": 1, "takeover_within": 10, "outbox_interval": 1, "watch_interval": 0,
      "grace_period": 5, "misfire_grace": 10}
TAKEOVER = 30  # the bound for a standby to take over


@pytest.fixture
def pg_url(request, pg_template):
    from tests.conftest import _pg_database

    return _pg_database(request, pg_template)


def replica(work: Path, config: Path, *args: str) -> Daemon:
    port = free_port()
    return Daemon(work, config, *args, "--metrics-port", str(port), metrics_port=port)


def crawls_stored(db_url: str) -> int:
    return query(db_url, "SELECT COUNT(*) FROM crawl")[0][0]


def leadership_lines(d: Daemon) -> list[dict]:
    return [r for r in map(json.loads, filter(None, d.logs().splitlines()))
            if r["logger"] == "gpuradar.leadership"]


# -- election, standby, fencing -------------------------------------------------------------
@pytest.mark.process  # two replicas, their signals
def test_two_replicas_one_leader_and_a_leader_without_its_lock_stops_at_once(tmp_path,
                                                                             pg_url):
    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    with WebhookSink() as hook:
        config = {"database_url": pg_url,
                  "sources": {"vastai": {"interval": 1, **FAST}, "fx": {"interval": 5, **FAST}},
                  "targets": {"hook": hook.url}, "rules": [], "daemon": HA,
                  "alerts": {"stale_after": "never"}}  # a 2026-08 recording
        path = write_config(tmp_path / "gpuradar.yaml", config)
        args = ("--replay", str(recordings), "--log-format", "json")
        a, b = replica(tmp_path, path, *args), replica(tmp_path, path, *args)
        holder = LockHolder(pg_url)
        try:
            a.wait_ready()
            b.wait_ready()
            leader = wait_for(lambda: one_leader(pg_url, a, b), 30, "exactly one leader",
                              on_fail=lambda: a.tail() + b.tail())
            standby = b if leader is a else a
            assert leader.value("gpuradar_leader") == 1
            assert standby.value("gpuradar_leader") == 0
            # only the leader crawls and evaluates ...
            leader.wait_metric("gpuradar_crawls_total", 3, source="vastai", status="ok")
            leader.wait_metric("gpuradar_rule_evaluations_total", 2, result="ok")
            assert standby.value("gpuradar_crawls_total", source="vastai", status="ok") == 0
            assert standby.value("gpuradar_rule_evaluations_total", result="ok") == 0
            # ... the standby is healthy and serves what the leader stored
            status, health = standby.healthz()
            assert status == 200 and health["role"] == "standby" and health["status"] == "ok"
            assert leader.healthz()[1]["role"] == "leader"
            assert standby.value("gpuradar_offers", None, source="vastai", pricing="spot",
                                 availability="available") > 0
            assert standby.value("gpuradar_database_up") == 1
            lines = leadership_lines(standby)
            assert any(r["role"] == "standby" and f":{leader.proc.pid} " in r["message"]
                       for r in lines), lines  # names the leader
            assert any(r["role"] == "leader" and "took the leader lock" in r["message"]
                       for r in leadership_lines(leader))

            # the leader's lock session dies (as on a lost network) while an outsider waits
            # for the lock: the leader must stop at once, and nobody may act without it
            holder.queue()
            (backend, _), = query(pg_url, "SELECT pid, application_name FROM pg_stat_activity "
                                  "WHERE application_name = :n",
                                  n=f"gpuradar lock {_host()}:{leader.proc.pid}")
            query(pg_url, "SELECT pg_terminate_backend(:p)", p=backend)
            wait_for(lambda: role(leader) == "standby", TAKEOVER, "the leader to stand down",
                     on_fail=leader.tail)
            wait_for(holder.held, 10, "the outsider to get the lock")
            assert leader.value("gpuradar_leader") == 0 == standby.value("gpuradar_leader")
            # the role flips (and /healthz says standby) before the line is logged: wait for it
            wait_for(lambda: any("leader lock lost" in r["message"] and r["level"] == "error"
                                 for r in leadership_lines(leader)), 30,
                     "the deposed leader's log line", on_fail=leader.tail)

            # nobody holds it: no crawl starts, and a new matching rule notifies nobody
            write_config(path, dict(config, rules=[H100_RULE]))
            for d in (a, b):
                d.signal(signal.SIGHUP)
                d.wait_metric("gpuradar_config_reloads_total", 1, result="success")
            before = crawls_stored(pg_url)
            # four attempts of each replica to take the lock, each finding it held
            # (the counter, not the clock, says that time passed without a leader)
            for d in (a, b):
                held = d.value("gpuradar_leader_lock_attempts_total", result="held")
                d.wait_metric("gpuradar_leader_lock_attempts_total", held + 4, result="held")
            assert a.value("gpuradar_leader_lock_attempts_total", result="taken") + \
                b.value("gpuradar_leader_lock_attempts_total", result="taken") == 1
            assert crawls_stored(pg_url) == before
            assert hook.posts == []
            assert query(pg_url, "SELECT COUNT(*) FROM notification") == [(0,)]

            # the lock is free again: one replica takes over and notifies once
            holder.release()
            new = wait_for(lambda: one_leader(pg_url, a, b), TAKEOVER, "a new leader",
                           on_fail=lambda: a.tail() + b.tail())
            wait_for(lambda: hook.posts, 30, "the new rule's notification", on_fail=new.tail)
            evaluations = new.value("gpuradar_rule_evaluations_total", result="ok")
            new.wait_metric("gpuradar_rule_evaluations_total", evaluations + 3, result="ok")
            assert len(hook.posts) == 1 and "H100" in hook.titles()[0]
            assert a.stop() == 0 and b.stop() == 0
        finally:
            holder.release()
            a.cleanup()
            b.cleanup()
    assert consistency_problems(pg_url) == []


def _host() -> str:
    import socket

    return socket.gethostname()[:30]


# -- kill -9 of the leader --------------------------------------------------------------------
@pytest.mark.process  # two replicas, their signals
def test_kill_9_of_the_leader_mid_delivery_the_standby_takes_over(tmp_path, provider_server,
                                                                  pg_url):
    endpoints = serve_standard(provider_server)
    standard_azure = provider_server.routes[("GET", "/api/retail/prices")]
    hang_azure = {"on": True, "answered": 0}

    def azure(req):  # the first crawl answers; then it hangs until the kill
        hang_azure["answered"] += 1
        if hang_azure["on"] and hang_azure["answered"] > AZURE_STANDARD_REQUESTS:
            return Reply(delay=60)
        return standard_azure(req)

    provider_server.route("GET", "/api/retail/prices", azure)
    with SmtpSink() as smtp, WebhookSink() as hook:
        path = write_config(tmp_path / "gpuradar.yaml", {
            "database_url": pg_url, "endpoints": endpoints,
            # azure's second crawl is the one in flight at the kill; after the takeover the
            # new leader crawls on while the test waits out the send's reservation (every
            # 1 and 2 s, the two replicas' crawls took 13 s of CPU; 9 s now)
            "sources": only_sources({"azure": {"interval": 2, **FAST},
                                     "vastai": {"interval": 3, **FAST},
                                     "fx": {"interval": 3600, **FAST}}),
            # rto: apprise waits up to 60 s for the webhook's answer, bounded by send_timeout;
            # the message in flight is reserved for 15 + 5 s, then sent again by the new leader
            "targets": {"mail": smtp.url, "hook": hook.url + "?rto=60"},
            "rules": [H100_RULE], "scrapy": {"DOWNLOAD_DELAY": 0},
            "alerts": {"send_timeout": 15}, "daemon": HA})

        def sql(q):
            return query(pg_url, q)

        hook.hang = 30  # the webhook keeps the leader's delivery in flight
        a = replica(tmp_path, path)
        b = None
        try:
            a.wait_ready()
            wait_for(lambda: role(a) == "leader", 30, "the first replica to lead",
                     on_fail=a.tail)
            b = replica(tmp_path, path)
            b.wait_ready()
            assert role(b) == "standby"
            wait_for(lambda: hook.posts and sql(
                "SELECT 1 FROM notification WHERE target = 'mail' AND status = 'sent'")
                and sql("SELECT 1 FROM crawl WHERE source = 'azure' AND status = 'ok'")
                and sql("SELECT 1 FROM crawl WHERE source = 'azure' AND status = 'running'"),
                30, "a delivery and a crawl in flight", on_fail=a.tail)
            a.kill9()
            hook.hang, hang_azure["on"] = 0, False
            assert sql("SELECT status FROM notification WHERE target = 'hook'") == [("pending",)]

            wait_for(lambda: one_leader(pg_url, b), TAKEOVER, "the standby to take over",
                     on_fail=b.tail)
            # the hung azure crawl (and any other the leader was running) is failed
            interrupted = sql("SELECT source FROM crawl WHERE status = 'failed' AND error "
                              "LIKE 'interrupted%'")
            assert ("azure",) in interrupted
            assert f"{len(interrupted)} crawl(s) left running by the previous leader marked " \
                "failed" in b.logs()
            # the notification in flight is sent again; evaluations on the new leader (at
            # takeover and after its crawls) find the rule firing already and send nothing
            b.wait_metric("gpuradar_notifications_total", 1, channel="webhook", status="sent")
            b.wait_metric("gpuradar_crawls_total", 2, source="vastai", status="ok")
            b.wait_metric("gpuradar_crawls_total", 1, source="azure", status="ok")
            b.wait_metric("gpuradar_rule_evaluations_total", 3, result="ok")
            assert b.value("gpuradar_outbox_backlog") == 0
            assert b.value("gpuradar_notifications_total", channel="email", status="sent") == 0
            assert b.stop() == 0
        finally:
            a.cleanup()
            if b is not None:
                b.cleanup()

    # at-least-once: only the message in flight at the kill arrived twice
    assert len(smtp.messages) == 1 and len(hook.posts) == 2
    assert hook.posts[0]["title"] == hook.posts[1]["title"]
    assert sql("SELECT status, COUNT(*) FROM notification GROUP BY status") == [("sent", 2)]
    assert consistency_problems(pg_url) == []


# -- SIGTERM of the leader --------------------------------------------------------------------
@pytest.mark.process  # two replicas, their signals
def test_sigterm_of_the_leader_hands_over_cleanly(tmp_path, pg_url):
    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    with WebhookSink() as hook:
        path = write_config(tmp_path / "gpuradar.yaml", {
            "database_url": pg_url, "sources": {"vastai": {"interval": 1, **FAST}},
            "targets": {"hook": hook.url}, "rules": [H100_RULE], "daemon": HA,
            # the replayed recording is from 2026-08: accept old data (issue #32)
            "alerts": {"stale_after": "never"}})
        a = replica(tmp_path, path, "--replay", str(recordings))
        b = None
        try:
            a.wait_ready()
            wait_for(lambda: role(a) == "leader", 30, "the first replica to lead",
                     on_fail=a.tail)
            b = replica(tmp_path, path, "--replay", str(recordings))
            b.wait_ready()
            wait_for(lambda: hook.posts, 30, "the notification", on_fail=a.tail)
            a.wait_metric("gpuradar_crawls_total", 2, source="vastai", status="ok")

            assert a.stop() == 0
            assert "leader lock released" in a.logs()
            wait_for(lambda: one_leader(pg_url, b), TAKEOVER, "the standby to take over",
                     on_fail=b.tail)
            # the database shows the lock as soon as it is taken; the log line follows once
            # the previous leader's crawls are checked (a thread): wait for it, then read it
            took = wait_for(lambda: [line for line in b.logs().splitlines()
                                     if "took the leader lock" in line], 30,
                            "the standby's log line of its takeover", on_fail=b.tail)
            assert "marked failed" not in took[0]  # nothing was left running
            b.wait_metric("gpuradar_crawls_total", 2, source="vastai", status="ok")
            b.wait_metric("gpuradar_rule_evaluations_total", 2, result="ok")
            assert len(hook.posts) == 1  # the firing rule is not notified again
            assert b.stop() == 0
        finally:
            a.cleanup()
            if b is not None:
                b.cleanup()
    assert query(pg_url, "SELECT status, COUNT(*) FROM notification GROUP BY status") == \
        [("sent", 1)]
    assert holder_pid(pg_url) is None
    assert consistency_problems(pg_url) == []


# -- a frozen leader (the server's view of a lost network) -------------------------------
@pytest.mark.process  # two replicas, their signals
def test_a_silent_leader_loses_the_lock_and_sends_nothing_more_when_it_wakes(tmp_path,
                                                                             pg_url):
    """SIGSTOP freezes the leader in the middle of a delivery pass, its connections open:
    the server hears nothing from it, as when its network is gone. The server drops the
    silent lock session (takeover_within - leader_retry = 9 s here), the standby takes over
    and sends the outbox. The old leader, woken up, finishes the one send it was in (the
    at-least-once window) but sends nothing more of its pass, and stands down before it
    crawls or evaluates again: its watch of the lock session finds the session gone the
    moment it wakes. The message it refused stays pending, untouched (no attempt counted).
    The message in flight is reserved for send_timeout (20 s here) + 5 s from its start:
    the new leader sends it again once that reservation has run out."""
    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    with WebhookSink() as hook:
        config = {
            "database_url": pg_url, "sources": {"vastai": {"interval": 1, **FAST}},
            # rto: apprise waits up to 60 s for the webhook's answer, bounded by send_timeout
            "targets": {"hook": hook.url + "?rto=60"}, "rules": [],
            "daemon": HA,  # a 2026-08 recording: never stale
            "alerts": {"send_timeout": 20, "stale_after": "never"}}
        path = write_config(tmp_path / "gpuradar.yaml", config)
        hook.hold()  # the first post is answered once released: the leader's pass waits
        a = replica(tmp_path, path, "--replay", str(recordings))
        b = None
        try:
            a.wait_ready()
            wait_for(lambda: role(a) == "leader", 30, "the first replica to lead",
                     on_fail=a.tail)
            b = replica(tmp_path, path, "--replay", str(recordings))
            b.wait_ready()
            # the rules come once both run (the standby first): the leader's first send,
            # whose send_timeout runs from its start, starts now, not while b was starting
            write_config(path, dict(config, rules=[H100_RULE, SECOND_RULE]))
            for d in (b, a):
                d.signal(signal.SIGHUP)
                d.wait_metric("gpuradar_config_reloads_total", 1, result="success")
            wait_for(lambda: hook.posts, 30, "the first notification", on_fail=a.tail)

            def done(d):  # crawls ended, whatever their status
                return d.wait_metric("gpuradar_crawls_total", 0, source="vastai")

            def evaluations(d):
                return d.wait_metric("gpuradar_rule_evaluations_total", 0, result="ok")

            a.signal(signal.SIGSTOP)
            assert query(pg_url, "SELECT COUNT(*) FROM notification WHERE status = "
                         "'pending'") == [(2,)]
            hook.release()  # answered while the leader is frozen
            wait_for(lambda: holder_pid(pg_url) == b.proc.pid and role(b) == "leader",
                     TAKEOVER, "the standby to take over from the silent leader",
                     on_fail=b.tail)
            # the new leader sends both: the one in flight again, and the other one
            wait_for(lambda: len(hook.posts) == 3, 30, "the new leader's notifications",
                     on_fail=b.tail)
            b.wait_metric("gpuradar_crawls_total", 2, source="vastai", status="ok")

            a.signal(signal.SIGCONT)
            # read as soon as it wakes: from here on at most what was in flight at the freeze
            # ends (one crawl, one evaluation: each runs one at a time), nothing new starts.
            # (Read before the freeze, the counts raced it: a loaded machine could end a
            # crawl and an evaluation between the read and the signal.)
            crawled, evaluated = done(a), evaluations(a)
            wait_for(lambda: role(a) == "standby", 30, "the woken leader to stand down",
                     on_fail=a.tail)
            # the role flips (and /healthz says standby) before the line is logged: wait for it
            wait_for(lambda: "leader lock lost" in a.logs(), 30,
                     "the woken leader's 'leader lock lost' line", on_fail=a.tail)
            # its pass ends: the next send is refused. (The send in flight was answered while
            # the process was frozen for longer than send_timeout: whether it counts it
            # sent or timed out is a race, and not what matters; the receiver's count is.)
            wait_for(lambda: "not sent: this replica lost the leader lock" in a.logs(), 40,
                     "the woken leader to refuse its next send", on_fail=a.tail)
            # at most the frozen send, if it timed out; the refused one counts nothing (and
            # the rows below show the late replica wrote nothing)
            assert a.wait_metric("gpuradar_notifications_total", 0, channel="webhook",
                                 status="retry") <= 1
            assert holder_pid(pg_url) == b.proc.pid
            # (role() is None while a scrape gets no answer in time: asked until it does)
            assert wait_for(lambda: role(b), 30, "b's /healthz", on_fail=b.tail) == "leader"
            # at most the crawl and the evaluation in flight at the freeze ended after it
            # woke; nothing new was started or evaluated by the old leader
            assert done(a) <= crawled + 1
            assert evaluations(a) <= evaluated + 1
            b.wait_metric("gpuradar_rule_evaluations_total", 3, result="ok")
            assert a.stop() == 0 and b.stop() == 0
        finally:
            hook.release()
            if a.proc.poll() is None:
                a.signal(signal.SIGCONT)
            a.cleanup()
            if b is not None:
                b.cleanup()

    # each rule notified once, the one in flight at the freeze twice (at-least-once): by
    # the new leader after the other one, once its reservation had run out
    titles = hook.titles()
    assert len(titles) == 3 and titles[0] == titles[2] != titles[1], titles
    rows = query(pg_url, "SELECT status, attempts, last_error FROM notification")
    assert sorted(rows) == [("sent", 1, ""), ("sent", 1, "")]  # the late replica wrote nothing
    assert consistency_problems(pg_url) == []


# -- SQLite: one daemon per file ----------------------------------------------------------------
@pytest.mark.process  # two processes, one file lock
def test_a_second_daemon_on_one_sqlite_file_refuses_to_start(tmp_path, sqlite_template):
    from gpuradar.core.units import EXIT_USAGE

    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    db = tmp_path / "gpuradar.db"
    shutil.copy(sqlite_template, db)
    path = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": f"sqlite:///{db}", "sources": {"vastai": {"interval": 1, **FAST}},
        "daemon": {"watch_interval": 0}})
    first = replica(tmp_path, path, "--replay", str(recordings))
    try:
        first.wait_ready()
        assert role(first) == "leader" and first.value("gpuradar_leader") == 1
        second = replica(tmp_path, path, "--replay", str(recordings))
        assert second.proc.wait(60) == EXIT_USAGE
        out = second.logs().strip().splitlines()
        assert len(out) == 1, out
        assert f"pid {first.proc.pid}" in out[0] and str(db.resolve()) in out[0]
        assert "cannot start" in out[0]
        # the first one goes on undisturbed
        crawls = first.value("gpuradar_crawls_total", source="vastai", status="ok")
        first.wait_metric("gpuradar_crawls_total", crawls + 1, source="vastai", status="ok")
        assert first.stop() == 0
    finally:
        first.cleanup()
    # the lock went with the process: the next daemon starts (the lock file stays behind)
    assert Path(f"{db}.lock").exists()
    third = replica(tmp_path, path, "--replay", str(recordings))
    try:
        third.wait_ready()
        assert role(third) == "leader"
        assert third.stop() == 0
    finally:
        third.cleanup()


def test_takeover_within_must_leave_the_leader_time_to_stop(tmp_path):
    from gpuradar.core.config import ConfigError, load_config
    from gpuradar.scheduler.jobs import daemon_options

    path = write_config(tmp_path / "c.yaml", {"daemon": {"leader_retry": "10s",
                                                         "takeover_within": "30s"}})
    with pytest.raises(ConfigError, match=r"daemon: takeover_within must be at least 4 x "
                                          r"leader_retry \(40s\), got 30s"):
        daemon_options(load_config(path))
    opts = daemon_options(load_config(write_config(path, {})))
    assert (opts.leader_retry, opts.takeover_within) == (5.0, 30.0)


# -- deploy: the compose example with two replicas ------------------------------------------------
DEPLOY = REPO / "deploy"
COMPOSE_HA = DEPLOY / "compose-ha.yaml"
PROMETHEUS_HA = DEPLOY / "prometheus" / "prometheus-ha.yml"


def test_compose_ha_runs_two_replicas_on_one_postgres_scraped_by_prometheus():
    from tests.project.test_deploy import bind_mounts, interpolate

    compose = interpolate(yaml.safe_load(COMPOSE_HA.read_text()))
    single = interpolate(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))["services"]
    services = compose["services"]
    replicas = {n: s for n, s in services.items() if s.get("command") == ["run"]}
    assert len(replicas) == 2
    for s in replicas.values():  # configured like the single daemon of compose.yaml
        assert s["environment"] == single["gpuradar"]["environment"]
        assert s["volumes"][0] == single["gpuradar"]["volumes"][0]  # the config file
        assert s["image"] == single["gpuradar"]["image"]
    # the same PostgreSQL, which also lets the streaming replica of the read side connect
    primary = dict(services["postgres"])
    assert primary.pop("command") == ["postgres", "-c", "wal_level=replica", "-c",
                                      "max_wal_senders=10"]
    primary["volumes"] = primary["volumes"][:1]
    primary["environment"] = {k: v for k, v in primary["environment"].items()
                              if k != "REPLICATION_PASSWORD"}
    assert primary == single["postgres"]
    assert services["migrate"] == single["migrate"]
    urls = {s["environment"]["GPURADAR_DATABASE_URL"] for s in replicas.values()}
    (url,) = urls
    assert url.startswith("postgresql://") and "@postgres:5432/" in url
    assert services["migrate"]["command"] == ["db", "upgrade"]
    ports = set()
    for s in replicas.values():
        env = s["environment"]
        assert s["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert env["GPURADAR_METRICS_ADDRESS"] == "0.0.0.0"
        for port in s["ports"]:
            assert port.startswith("127.0.0.1:")
            ports.add(port.split(":")[1])
    assert len(ports) == 4  # each its metrics and its web page, none shared
    config = yaml.safe_load(PROMETHEUS_HA.read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "gpuradar"]
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{n}:{s['environment']['GPURADAR_METRICS_PORT']}"
                       for n, s in replicas.items()}
    mounts = bind_mounts(services["prometheus"])
    assert mounts["/etc/prometheus/prometheus.yml"] == PROMETHEUS_HA
    assert mounts["/etc/prometheus/alerts.yml"] == DEPLOY / "prometheus" / "alerts.yml"
    assert config["rule_files"] == ["alerts.yml"]


def test_compose_ha_readers_read_a_streaming_replica_behind_a_proxy():
    """The read side of compose-ha.yaml: a hot standby cloned from postgres with
    pg_basebackup -R (a replication role the primary creates at its first start), two
    `gpuradar serve` replicas reading only the standby (no leader URL given them at all),
    published only through the reverse proxy, whose upstreams are exactly those two."""
    from tests.project.test_deploy import bind_mounts, interpolate

    services = interpolate(yaml.safe_load(COMPOSE_HA.read_text()))["services"]
    primary, standby = services["postgres"], services["postgres-replica"]
    init = bind_mounts(primary)["/docker-entrypoint-initdb.d/replication.sh"].read_text()
    assert "WITH REPLICATION LOGIN" in init and "host replication replicator" in init
    assert standby["image"] == primary["image"]
    script = standby["command"][-1]
    assert "pg_basebackup -h postgres -U replicator" in script and " -R " in script
    assert script.rstrip().endswith("exec postgres")
    assert standby["depends_on"]["postgres"]["condition"] == "service_healthy"

    readers = {n: s for n, s in services.items() if s.get("command") == ["serve"]}
    assert sorted(readers) == ["serve-1", "serve-2"]
    for s in readers.values():
        env = s["environment"]
        assert "GPURADAR_DATABASE_URL" not in env  # the leader: never theirs
        assert "@postgres-replica:5432/" in env["GPURADAR_READ_DATABASE_URL"]
        assert env["GPURADAR_WEB_ADDRESS"] == "0.0.0.0" and "ports" not in s
        assert f"127.0.0.1:{env['GPURADAR_WEB_PORT']}/api/v1/" in " ".join(
            s["healthcheck"]["test"])
        assert s["depends_on"]["postgres-replica"]["condition"] == "service_healthy"
    proxy = services["proxy"]
    assert [p.split(":")[0] for p in proxy["ports"]] == ["127.0.0.1"]
    conf = bind_mounts(proxy)["/etc/nginx/conf.d/default.conf"].read_text()
    upstreams = re.findall(r"^\s*server (\S+?)(?: |;)", conf, re.M)
    assert sorted(upstreams) == sorted(f"{n}:{s['environment']['GPURADAR_WEB_PORT']}"
                                       for n, s in readers.items())


def test_compose_ha_is_accepted_by_docker_compose_and_promtool(tmp_path):
    import os

    from tests.project.test_deploy import run, tool

    docker = shutil.which("docker")
    plugin = docker and run(docker, "compose", "version").returncode == 0
    command = [docker, "compose"] if plugin else [tool("docker-compose")]
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    proc = run(*command, "-f", str(COMPOSE_HA), "config", cwd=tmp_path, env=clean)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len([n for n in yaml.safe_load(proc.stdout)["services"]
                if re.fullmatch(r"gpuradar-\d", n)]) == 2
    proc = run(tool("promtool"), "check", "config", str(PROMETHEUS_HA))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.process  # concurrent `db upgrade` processes
def test_replicas_migrating_a_new_database_together_take_turns(request):
    """Replicas of a new release start at once on a database that needs migrating: each
    waits for the migration lock (held here by an outside session standing in for a first
    migrator), says so, and then finds the schema at head; none fails on the same tables."""
    import psycopg
    from sqlalchemy.engine import make_url

    from gpuradar.storage.leader import MIGRATION_LOCK_KEY
    from tests.clirun import start_gpuradar
    from tests.conftest import _pg_connect, pg_url

    name = f"gpuradar_empty_{int(time.time() * 1000)}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    request.addfinalizer(lambda: _pg_connect().execute(
        f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    url = pg_url(name)
    outsider = psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(
        hide_password=False), autocommit=True)
    outsider.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    replicas = [start_gpuradar("db", "upgrade", db_url=url) for _ in range(2)]
    try:
        wait_for(lambda: len(query(url, "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                                        "AND NOT granted")) == 2, 60,
                 "both replicas to wait for the migration lock")
        assert not query(url, "SELECT 1 FROM information_schema.tables "
                              "WHERE table_name = 'offers'")  # nothing migrated meanwhile
        outsider.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        outputs = [p.communicate(timeout=120) for p in replicas]
    finally:
        outsider.close()
        for p in replicas:
            p.kill()
    assert [p.returncode for p in replicas] == [0, 0], outputs
    for _, stderr in outputs:
        assert "another gpuradar is migrating this database; waiting for it" in stderr
        assert "Traceback" not in stderr
    from alembic.script import ScriptDirectory

    from gpuradar.storage.db import alembic_config, get_engine

    head = ScriptDirectory.from_config(alembic_config(get_engine(url))).get_current_head()
    assert query(url, "SELECT version_num FROM alembic_version") == [(head,)]
