"""deploy/: the container image, the compose stack, Prometheus rules, the Grafana dashboard,
the systemd unit and the example config are consistent with each other and with the app.

Where the real tools are installed they check too: `docker-compose config` (or `docker
compose config`), `promtool check/test rules`, `systemd-analyze verify/security`. Without
them those checks skip, except when GPURADAR_REQUIRE_DEPLOY_TOOLS=1 (CI): then they fail.
The database path of production (migrations from empty and from the previous revision) runs
on the real PostgreSQL server and on SQLite."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import free_port

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "gpuradar.json"
DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml"
PROVIDERS = DEPLOY / "grafana" / "provisioning" / "dashboards" / "gpuradar.yaml"
UNIT = DEPLOY / "systemd" / "gpuradar.service"
EXAMPLE = DEPLOY / "config.example.yaml"
REQUIRE_TOOLS = os.environ.get("GPURADAR_REQUIRE_DEPLOY_TOOLS") == "1"
# Series Prometheus itself adds to every scrape target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                     "scrape_samples_post_metric_relabeling", "scrape_series_added"}


def tool(*names: str) -> str:
    """Path of the first installed tool of `names`; skip (or fail in CI) without one."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    message = f"{' / '.join(names)} not installed"
    if REQUIRE_TOOLS:
        pytest.fail(message + " (GPURADAR_REQUIRE_DEPLOY_TOOLS=1)")
    pytest.skip(message)


def run(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)


# -- what the app exports ----------------------------------------------------------------------
SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                   "summary": ("", "_count", "_sum"), "info": ("_info",),
                   "gaugehistogram": ("_bucket", "_gcount", "_gsum")}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> set[str]:
    """Every series name the daemon's metrics module exposes: its registry's families (the
    database collector's read from a real, migrated database) and every collector's
    describe(), expanded to sample names by type."""
    from gpuradar.scheduler.metrics import Metrics
    from gpuradar.storage.db import get_engine, upgrade

    engine = get_engine(f"sqlite:///{tmp_path_factory.mktemp('metrics') / 'm.db'}")
    upgrade(engine)
    metrics = Metrics(lambda: engine)
    registry = metrics.registry
    families = list(registry.collect())
    for collector in list(registry._collector_to_names):  # custom collectors' describe()
        describe = getattr(collector, "describe", None)
        families += list(describe() if describe else [])
    names = set()
    for family in families:
        for suffix in SAMPLE_SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
        names.update(sample.name for sample in family.samples)
    engine.dispose()
    assert "gpuradar_cheapest_usd_per_gpu_hour" in names  # the database collector answered
    return names


# -- PromQL ----------------------------------------------------------------------------------
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "atan2", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression (or a Grafana query using variables) reads."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)   # strings
    e = re.sub(r"\$\{?\w+(?::\w+)?\}?", "", e)                          # Grafana variables
    e = re.sub(r"\{[^}]*\}", "", e)                                     # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                                    # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?\w+", "", e)
    e = re.sub(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[a-zA-Z]*", "", e)  # numbers
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group(0).lower() in _KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(m.group(0))
    return names


def test_metric_name_extraction():
    expr = ('sum by (source) (rate(gpuradar_crawls_total{status="failed", x=~"a|b"}[5m])) '
            '/ on (source) group_left () x:recorded offset 1h > bool 3e2 * 1.5 '
            'and histogram_quantile(0.9, foo_bucket{le!="+Inf"}) unless absent(up{job="g"})')
    assert metric_names(expr) == {"gpuradar_crawls_total", "x:recorded", "foo_bucket", "up"}
    assert metric_names('min by (gpu) (m{gpu=~"$gpu", s=~"${source}"})') == {"m"}
    assert metric_names("time() - m[$__rate_interval]") == {"m"}


def grafana_variables(expr: str) -> str:
    """The dashboard's Grafana variables replaced so that Prometheus can parse it."""
    for var, value in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h")):
        expr = expr.replace(var, value)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


# -- the dashboard ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dash["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries(dash: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    out = [(f"panel {p['title']!r}", t["expr"]) for p in panels(dash)
           for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"label_values\((.+),\s*\w+\)", query.strip())
        out.append((f"variable {var['name']!r}", m.group(1) if m else query))
    return out


def test_dashboard_queries_use_only_exported_metrics(dashboard, exported):
    recorded = {r["record"] for g in yaml.safe_load(ALERTS.read_text())["groups"]
                for r in g["rules"] if "record" in r}
    known = exported | PROMETHEUS_SERIES | recorded
    used: set[str] = set()
    for where, expr in dashboard_queries(dashboard):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        unknown = names - known
        assert not unknown, f"{where}: {sorted(unknown)} not exported by gpuradar ({expr})"
        used |= names
    # the panels the dashboard exists for
    for needed in ("gpuradar_cheapest_usd_per_gpu_hour", "gpuradar_offers",
                   "gpuradar_crawls_total", "gpuradar_last_success_timestamp_seconds",
                   "gpuradar_rules_firing", "gpuradar_notifications_total",
                   "gpuradar_outbox_backlog"):
        assert needed in used, f"no panel shows {needed}"


def test_dashboard_is_well_formed(dashboard):
    assert dashboard["uid"] == "gpuradar" and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids, cells = set(), set()
    for panel in panels(dashboard):
        assert panel["id"] not in ids, f"duplicate panel id {panel['id']}"
        ids.add(panel["id"])
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"panel {panel['title']!r} overlaps another"
                cells.add((x, y))
        if panel["type"] == "row":
            continue
        assert panel.get("description"), f"panel {panel['title']!r} has no description"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
        # every variable a panel uses exists
        for expr in (t["expr"] for t in panel["targets"]):
            for var in re.findall(r"\$\{?(\w+)\}?", expr):
                assert var.startswith("__") or var in variables, f"{var} in {expr}"


def test_dashboard_promql_parses(dashboard, tmp_path):
    promtool = tool("promtool")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": grafana_variables(expr)}
        for i, (_, expr) in enumerate(dashboard_queries(dashboard))]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = run(promtool, "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_grafana_provisioning_matches_compose(compose):
    sources = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    (prom,) = [s for s in sources if s["type"] == "prometheus"]
    assert prom["isDefault"] is True
    assert prom["url"] == "http://prometheus:9090"
    assert "prometheus" in compose["services"]
    assert any(p.endswith(":9090") for p in compose["services"]["prometheus"]["ports"])
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    mounts = bind_mounts(compose["services"]["grafana"])
    assert mounts[provider["options"]["path"]] == DASHBOARD.parent
    assert mounts["/etc/grafana/provisioning"] == DATASOURCES.parent.parent
    grafana_env = compose["services"]["grafana"]["environment"]
    home = grafana_env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"


# -- Prometheus --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def test_alert_rules_use_only_exported_metrics(alert_rules, exported):
    recorded = {r["record"] for r in alert_rules if "record" in r}
    names = {r["alert"] for r in alert_rules if "alert" in r}
    assert {"GpuradarSourceStale", "GpuradarCrawlErrorRatio", "GpuradarOutboxBacklogGrowing",
            "GpuradarDown"} <= names
    for rule in alert_rules:
        unknown = metric_names(str(rule["expr"])) - exported - PROMETHEUS_SERIES - recorded
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {sorted(unknown)}"
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            if "for" in rule:
                assert re.fullmatch(r"\d+[smhd]", rule["for"])


def test_staleness_reads_the_interval_the_daemon_exports(alert_rules):
    """Staleness is 'more than 3 intervals' of the interval in force, which the daemon
    exports per source (gpuradar_source_interval_seconds): the rules keep no list of sources
    to fall behind a new provider or a changed interval (alerts_test.yml checks the alert)."""
    stale = next(r for r in alert_rules if r.get("alert") == "GpuradarSourceStale")
    assert "3 * gpuradar_source_interval_seconds" in stale["expr"]
    assert not [r for r in alert_rules if "record" in r or "source" in r.get("labels", {})]


def test_promtool_checks_rules_config_and_unit_tests():
    promtool = tool("promtool")
    for args in (("check", "rules", str(ALERTS)), ("check", "config", str(PROMETHEUS)),
                 ("test", "rules", str(ALERTS.with_name("alerts_test.yml")))):
        proc = run(promtool, *args)
        assert proc.returncode == 0, f"promtool {' '.join(args)}:\n{proc.stdout}{proc.stderr}"


def test_prometheus_scrapes_the_compose_service(compose):
    config = yaml.safe_load(PROMETHEUS.read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "gpuradar"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    (target,) = job["static_configs"][0]["targets"]
    env = compose["services"]["gpuradar"]["environment"]
    assert target == f"gpuradar:{env['GPURADAR_METRICS_PORT']}"
    assert config["rule_files"] == [ALERTS.name]
    mounts = bind_mounts(compose["services"]["prometheus"])
    assert mounts["/etc/prometheus/prometheus.yml"] == PROMETHEUS
    assert mounts[f"/etc/prometheus/{ALERTS.name}"] == ALERTS
    command = compose["services"]["prometheus"]["command"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in command


# -- compose -----------------------------------------------------------------------------------
_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value: Any) -> Any:
    """Compose's ${VAR:-default}, with every variable unset (what `up` sees by default)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: m.group(2) or "", value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of a service's bind mounts."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = (DEPLOY / source).resolve()
    return out


def test_compose_services_volumes_ports_and_environment(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "gpuradar", "prometheus", "grafana"}
    declared = set(compose["volumes"])
    used = set()
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for dep in service.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown {dep}"
        if "build" in service:
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]
                    ).resolve() == DOCKERFILE
    assert used == declared, f"unused volumes {declared - used}"

    pg = services["postgres"]["environment"]
    assert "healthcheck" in services["postgres"]
    app = services["gpuradar"]
    env = app["environment"]
    url = f"postgresql://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/" \
          f"{pg['POSTGRES_DB']}"
    assert env["GPURADAR_DATABASE_URL"] == url
    assert services["migrate"]["environment"]["GPURADAR_DATABASE_URL"] == url
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert app["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert app["command"] == ["run"]
    # reachable by Prometheus inside the network, published on loopback only
    assert env["GPURADAR_METRICS_ADDRESS"] == env["GPURADAR_WEB_ADDRESS"] == "0.0.0.0"
    assert app["ports"] == [f"127.0.0.1:{env[port]}:{env[port]}"
                            for port in ("GPURADAR_METRICS_PORT", "GPURADAR_WEB_PORT")]
    mounts = bind_mounts(app)
    assert mounts[env["GPURADAR_CONFIG"]] == EXAMPLE
    assert "gpuradar-data:/var/lib/gpuradar" in app["volumes"]


def test_compose_passes_only_variables_gpuradar_reads(compose):
    from gpuradar.core.config import Config
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes

    code = "\n".join(p.read_text() for d in ("gpuradar", "scheduler", "storage", "crawler")
                     for p in (REPO / d).rglob("*.py"))
    env = compose["services"]["gpuradar"]["environment"]
    for name in env:
        if name.startswith("GPURADAR_"):
            assert f'"{name}"' in code, f"{name} is read nowhere in gpuradar"
    credentials = {var for cls in spider_classes(scrapy_settings(
        Config(database_url="sqlite://"))).values() for var in cls.credentials.values()}
    assert credentials <= set(env), f"not passed: {sorted(credentials - set(env))}"


def test_docker_compose_config_accepts_the_file(tmp_path):
    docker = shutil.which("docker")
    plugin = docker and run(docker, "compose", "version").returncode == 0
    command = [docker, "compose"] if plugin else [tool("docker-compose")]
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    proc = run(*command, "-f", str(COMPOSE), "config", cwd=tmp_path, env=clean)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    assert set(resolved["services"]) == {"postgres", "migrate", "gpuradar", "prometheus",
                                         "grafana"}


# -- the image --------------------------------------------------------------------------------
def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        if line.lstrip().startswith("#"):
            continue
        current += line.rstrip("\\").strip() + " " if line.endswith("\\") else line.strip()
        if line.endswith("\\"):
            continue
        if current.strip():
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        current = ""
    return out


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for instruction in dockerfile_instructions():
        if instruction[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def test_image_is_multi_stage_non_root_with_healthcheck_and_entrypoint():
    build, final = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert any(arg.startswith("--from=") for op, arg in final if op == "COPY")
    user = [arg for op, arg in final if op == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root")
    # the health check asks the configured port's /healthz (`gpuradar healthcheck`), through
    # the entry point so that it reads the configuration `run` reads
    (health,) = [arg for op, arg in final if op == "HEALTHCHECK"]
    health_cmd = json.loads(health.split(" CMD ", 1)[1])
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(arg for op, arg in final if op == "ENV")))
    assert env["GPURADAR_METRICS_ADDRESS"] == env["GPURADAR_WEB_ADDRESS"] == "0.0.0.0"
    from gpuradar.core.config import WebSection
    from gpuradar.scheduler.jobs import METRICS_DEFAULTS

    assert [arg for op, arg in final if op == "EXPOSE"] == [
        f"{METRICS_DEFAULTS['port']} {WebSection().port}"]
    volumes = [json.loads(arg) for op, arg in final if op == "VOLUME"]
    assert volumes == [[env["GPURADAR_DATA_DIR"]]]
    (entrypoint,) = [json.loads(arg) for op, arg in final if op == "ENTRYPOINT"]
    (cmd,) = [json.loads(arg) for op, arg in final if op == "CMD"]
    assert entrypoint[-1] == "/usr/local/bin/gpuradar-entrypoint" and cmd == ["run"]
    assert health_cmd == entrypoint[entrypoint.index("--") + 1:] + ["healthcheck"]
    assert 'exec gpuradar "$@"' in (DEPLOY / "entrypoint.sh").read_text()
    for op, arg in build + final:  # secrets come in at run time only
        if op in ("ENV", "ARG"):
            assert not re.search(r"(KEY|TOKEN|PASSWORD|SECRET)\w*=", arg, re.I), arg


def test_image_installs_like_the_makefile_and_ci():
    """One install path: pip installs the project (pyproject.toml's dependencies) in the
    image as `make install`/`make install-test` (what .ci/run runs) do, from the same
    package directories; Chromium is the same Debian package. (The dependencies go in a
    layer of their own first, read from pyproject.toml itself, not from a second list.)"""
    runs = [arg for stage in stages() for op, arg in stage if op == "RUN"]
    targets = []
    for r in runs:
        for m in re.finditer(r"pip install ([^&;|]+)", r):
            args = m.group(1).split()
            target = [a for a in args if not a.startswith("-")]
            targets.append(target)
            if target == ["/dev/stdin"]:  # -r /dev/stdin: pyproject.toml's dependencies
                assert args[-2] == "-r" and 'open("pyproject.toml"' in r
                assert '["project"]["dependencies"]' in r
            else:
                assert target in (["."], ["pip"]), args
    assert ["."] in targets and ["/dev/stdin"] in targets, targets
    assert not any("requirements" in r or "playwright install" in r for r in runs)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^UV_INSTALL := \$\(BIN\)/uv pip install ", makefile, re.M)  # uv's pip
    assert re.search(r"^PIP_INSTALL := \$\(UV_INSTALL\) --compile-bytecode$", makefile, re.M)
    assert re.search(r"\$\(PIP_INSTALL\) -q [-\w ]*\.$", makefile, re.M)  # make install
    assert re.search(r"\$\(UV_INSTALL\) -q -e '\.\[test,contract\]'", makefile)  # install-test
    assert "make test" in (REPO / ".ci" / "run").read_text()

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    copied = {src.rstrip("/") for op, arg in stages()[0] if op == "COPY"
              for src in [a for a in arg.split() if not a.startswith("--")][:-1]}
    # the package and the folders its links in gpuradar/ point at
    folders = {"gpuradar"} | {link.readlink().name for link in (REPO / "gpuradar").iterdir()
                              if link.is_symlink()}
    assert folders == {"gpuradar", "crawler", "storage", "alerts", "scheduler"}
    assert folders | {"pyproject.toml", pyproject["project"]["readme"]} <= copied
    for path in copied | {"deploy/entrypoint.sh"}:
        assert (REPO / path).exists(), path
        assert dockerignore_allows(path), f".dockerignore leaves {path} out of the context"
    assert not dockerignore_allows(".venv") and not dockerignore_allows("gpuradar.db")

    apt = " ".join(r for r in runs if "apt-get install" in r).split()
    # the browser variant: Chromium and the library Playwright's Node.js driver needs
    assert "chromium" in apt and "libatomic1" in apt
    assert "apt-get install" in makefile and "chromium" in makefile
    from gpuradar.crawler import settings

    assert settings.PLAYWRIGHT_LAUNCH_OPTIONS["executable_path"] == "/usr/bin/chromium"


def _ignore_matches(path: str, pattern: str) -> bool:
    """A .dockerignore pattern matches a path or one of its parent directories."""
    parts = path.split("/")
    if pattern.startswith("**/"):
        return any(fnmatchcase("/".join(parts[i:j]), pattern[3:])
                   for i in range(len(parts)) for j in range(i + 1, len(parts) + 1))
    return any(fnmatchcase("/".join(parts[:j]), pattern) for j in range(1, len(parts) + 1))


def dockerignore_allows(path: str) -> bool:
    """Docker's rule: the last matching pattern decides; `!` re-includes."""
    allowed = True
    for line in (REPO / ".dockerignore").read_text().splitlines():
        pattern = line.strip()
        if pattern and not pattern.startswith("#"):
            negate = pattern.startswith("!")
            if _ignore_matches(path, pattern.lstrip("!").rstrip("/")):
                allowed = negate
    return allowed



def test_image_entrypoint_and_healthcheck_run_the_daemon(request, tmp_path, pg_template):
    """What the container runs: the entry point script starting `gpuradar run` with the
    image's environment and the compose database URL (PostgreSQL, migrated on start), and
    the HEALTHCHECK command passing against it on the port the config file sets (not the
    default); SIGTERM stops it cleanly. (tests/project/test_image.py does it in the image.)"""
    from gpuradar.core.config import Config
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes
    from tests.conftest import _pg_database

    url = _pg_database(request, pg_template)
    recordings = REPO / "gpuradar" / "recordings"
    names = list(spider_classes(scrapy_settings(Config(database_url="sqlite://"))))
    config = tmp_path / "config.yaml"
    port = free_port()
    config.write_text(yaml.safe_dump({"sources": {n: {"enabled": n == "vastai"} for n in names},
                                      "metrics": {"port": port},
                                      "web": {"port": 0}}))  # any free one
    final = stages()[-1]
    image_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for op, a in final if op == "ENV")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    env |= {"PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
            "GPURADAR_METRICS_ADDRESS": image_env["GPURADAR_METRICS_ADDRESS"],
            "GPURADAR_DATA_DIR": str(tmp_path / "data"),
            "GPURADAR_DATABASE_URL": url, "GPURADAR_CONFIG": str(config),
            "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen(["sh", str(DEPLOY / "entrypoint.sh"), "run", "--replay",
                             str(recordings), "--interval", "60"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    (health,) = [a for op, a in final if op == "HEALTHCHECK"]
    check = [str(DEPLOY / "entrypoint.sh") if a == "/usr/local/bin/gpuradar-entrypoint" else a
             for a in json.loads(health.split(" CMD ", 1)[1])]
    try:
        deadline = time.monotonic() + 90
        while True:
            result = subprocess.run(check, env=env, capture_output=True, timeout=30)
            if result.returncode == 0:
                break
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
            assert time.monotonic() < deadline, "HEALTHCHECK never passed:\n" + \
                (tmp_path / "daemon.log").read_text()
            time.sleep(0.2)
        assert result.stdout.decode().startswith(f"healthy: http://127.0.0.1:{port}/healthz: 200")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert "gpuradar_database_up 1.0" in text
        assert f"0.0.0.0:{port}" in (tmp_path / "daemon.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, (tmp_path / "daemon.log").read_text()


# -- systemd -----------------------------------------------------------------------------------
def unit_directives() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_systemd_unit_is_hardened():
    d = unit_directives()
    assert d["User"] == ["gpuradar"] and d["Group"] == ["gpuradar"]
    assert d["ProtectSystem"] == ["strict"] and d["StateDirectory"] == ["gpuradar"]
    assert d["Restart"] == ["on-failure"]
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert shlex.split(d["ExecStart"][0])[1:] == ["run", "--config",
                                                  "/etc/gpuradar/config.yaml"]
    assert "GPURADAR_DATA_DIR=/var/lib/gpuradar" in d["Environment"][0].split()
    assert d["NoNewPrivileges"] == ["yes"] and d["CapabilityBoundingSet"] == [""]
    # Chromium's and Node's JIT need writable executable memory
    assert "MemoryDenyWriteExecute" not in d
    # SIGTERM: the stop budget fits before SIGKILL (test_every_stop_grace_period_...)
    assert "TimeoutStopSec" in d


# -- the stop budget -----------------------------------------------------------------------------
STOP_MARGIN = 5.0  # seconds beyond daemon.stop_timeout for the process to exit


def _key_values(node: Any, key: str) -> Iterator[Any]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _key_values(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _key_values(v, key)


def stop_grace_periods() -> dict[str, float]:
    """Every grace period before SIGKILL that deploy/ and the docs give `gpuradar run`:
    compose services running it (Docker's default, 10 s, when a file says none), the
    systemd unit's TimeoutStopSec, any Kubernetes-style manifest's
    terminationGracePeriodSeconds, and the `docker stop -t` / `--stop-timeout` the docs
    show."""
    from gpuradar.core.units import parse_duration

    out: dict[str, float] = {}
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for name, service in ((doc or {}).get("services") or {}).items():
                if service.get("command") == ["run"]:
                    out[f"{path.name}: {name}"] = parse_duration(
                        service.get("stop_grace_period", "10s")).total_seconds()
            for n, value in enumerate(_key_values(doc, "terminationGracePeriodSeconds")):
                out[f"{path.name}: terminationGracePeriodSeconds #{n}"] = float(value)
    (timeout,) = unit_directives().get("TimeoutStopSec", ["90s"])  # systemd's default
    out[UNIT.name] = parse_duration(timeout).total_seconds()
    for doc in (REPO / "docs" / "deploy.md", REPO / "README.md"):
        text = doc.read_text()
        for m in re.finditer(r"docker stop -t (\d+)|--stop-timeout[ =](\d+)", text):
            out[f"{doc.name}: {m.group(0)}"] = float(m.group(1) or m.group(2))
    return out


def test_every_stop_grace_period_is_longer_than_the_stop_budget():
    """SIGTERM ends gpuradar within daemon.stop_timeout; a service manager that kills it
    sooner would cut a handover short (a send in flight, the lock not yet released)."""
    from gpuradar.scheduler.jobs import DAEMON_DEFAULTS

    budget = DAEMON_DEFAULTS["stop_timeout"]
    graces = stop_grace_periods()
    assert {"compose.yaml: gpuradar", "compose-ha.yaml: gpuradar-1",
            "compose-ha.yaml: gpuradar-2", UNIT.name} <= set(graces)
    assert any(k.startswith(("deploy.md: docker stop", "deploy.md: --stop-timeout"))
               for k in graces), graces
    short = {k: v for k, v in graces.items() if v < budget + STOP_MARGIN}
    assert short == {}, f"shorter than stop_timeout ({budget:g}s) + {STOP_MARGIN:g}s: {short}"
    # the budget is stated where users look for it
    readme = (REPO / "README.md").read_text()
    assert f"`daemon.stop_timeout` ({budget:g} s)" in readme
    assert "stop_timeout: 40s" in EXAMPLE.read_text() and budget == 40


def test_systemd_analyze_verifies_the_unit(tmp_path):
    analyze = tool("systemd-analyze")
    # the unit as installed, its ExecStart pointing at this checkout's gpuradar
    gpuradar = Path(sys.executable).parent / "gpuradar"
    assert gpuradar.exists()
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/gpuradar/bin/gpuradar", str(gpuradar)))
    proc = run(analyze, "verify", "--man=no", str(unit))
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stdout + proc.stderr
    # exposure on systemd's 0-100 scale (shown as 0.0-10.0): at most 2.0, "OK"
    proc = run(analyze, "security", "--offline=true", "--threshold=20", str(unit))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr


# -- the example configuration -----------------------------------------------------------------
def test_example_config_documents_every_key_with_its_default():
    from gpuradar.alerts.engine import SETTING_KEYS, AlertSettings, parse_settings
    from gpuradar.alerts.loader import load_rules, load_targets
    from gpuradar.core.config import KNOWN_KEYS, Config, load_config
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes
    from gpuradar.scheduler.jobs import (
        DAEMON_DEFAULTS,
        METRICS_DEFAULTS,
        daemon_options,
        metrics_options,
    )

    raw = yaml.safe_load(EXAMPLE.read_text())
    assert set(raw) == set(KNOWN_KEYS)
    assert set(raw["daemon"]) == set(DAEMON_DEFAULTS)
    assert raw["metrics"] == METRICS_DEFAULTS
    assert set(raw["alerts"]) == SETTING_KEYS
    cfg = load_config(EXAMPLE)
    defaults = Config(database_url=cfg.database_url)
    assert daemon_options(cfg) == daemon_options(defaults)
    assert metrics_options(cfg) == metrics_options(defaults)
    assert parse_settings(cfg.alerts) == AlertSettings()
    assert load_rules(cfg, load_targets(cfg)) == []
    spiders = spider_classes(scrapy_settings(cfg))
    assert set(raw["sources"]) == set(spiders)
    text = EXAMPLE.read_text()
    for name, cls in spiders.items():
        assert raw["sources"][name] == {"enabled": True}
        for endpoint in cls.endpoints:
            assert f"{name}.{endpoint}" in text, f"endpoint {name}.{endpoint} not documented"
        for env in cls.credentials.values():
            prefix = env.rsplit("_", 1)[0]
            assert env in text or prefix in text, f"{env} not documented"
    # the example enables what no config enables, nothing more
    plain = scrapy_settings(defaults)
    assert {n: c.status(scrapy_settings(cfg))[0] for n, c in spiders.items()} == \
        {n: c.status(plain)[0] for n, c in spiders.items()}


# -- the production database path --------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request, tmp_path) -> str:
    """A database with no schema at all (not a migrated template)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    from tests.conftest import PG_ADMIN, _pg_connect

    request.getfixturevalue("pg_template")  # PostgreSQL reachable (or skip / fail in CI)
    name = f"gpuradar_empty_{uuid.uuid4().hex[:10]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")

    def drop() -> None:
        from gpuradar.storage.db import get_engine

        get_engine(f"{url}/{name}").dispose()
        with _pg_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    request.addfinalizer(drop)
    return f"{url}/{name}"


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    from gpuradar.storage.db import alembic_config, get_engine

    return ScriptDirectory.from_config(alembic_config(get_engine("sqlite://"))).get_current_head()


def current_revision(engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def index_names(engine) -> set[str]:
    from sqlalchemy import inspect

    inspector = inspect(engine)
    return {ix["name"] for table in inspector.get_table_names()
            for ix in inspector.get_indexes(table)}


QUERY_INDEXES = {"ix_offer_cheapest", "ix_offer_counts", "ix_crawl_source_id",
                 "ix_crawl_not_ok"}


def test_migrations_from_empty_and_from_the_previous_revision(empty_url):
    """`gpuradar db upgrade` on an empty database; then the upgrade path of a database at
    the previous revision holding data, and back down and up again."""
    from alembic import command
    from sqlalchemy import insert, select

    from gpuradar.storage.db import alembic_config, get_engine, upgrade
    from gpuradar.storage.models import CHANGE, CRAWL, OFFER
    from tests.clirun import gpuradar

    head = head_revision()
    assert head == "0010_interruption_series"
    proc = gpuradar("db", "upgrade", db_url=empty_url)
    assert proc.returncode == 0, proc.stderr
    engine = get_engine(empty_url)
    assert current_revision(engine) == head
    assert index_names(engine) >= QUERY_INDEXES

    command.downgrade(alembic_config(engine), "0002")
    assert current_revision(engine) == "0002"
    assert not QUERY_INDEXES & index_names(engine)
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    with engine.begin() as conn:
        oid = conn.execute(insert(OFFER).values(
            source="azure", region="eastus", zone="", instance_type="NC40", pricing="spot",
            gpu="H100-NVL-94GB", gpu_count=1, price=2.5, currency="USD", url="",
            attributes={"a": 1}, first_seen=now, changed_at=now, active=True,
        ).returning(OFFER.c.id)).scalar_one()
        conn.execute(insert(CHANGE).values(
            offer_id=oid, at=int(now.timestamp()), price_micros=2_500_000, available=True))
        conn.execute(insert(CRAWL).values(
            source="azure", started_at=now, status="ok", dropped={}, unknown_gpus=[]))
    upgrade(engine)
    assert current_revision(engine) == head
    assert index_names(engine) >= QUERY_INDEXES
    with engine.connect() as conn:
        price = conn.execute(select(CHANGE.c.price_micros)).scalar_one()
        assert price == 2_500_000
        assert conn.execute(select(OFFER.c.attributes)).scalar_one() == {"a": 1}


def test_migrated_schema_matches_the_models(engine):
    """No drift between the migrations and storage/models.py, except the query indexes of
    0003 when the models do not declare them (yet)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from gpuradar.storage.models import metadata

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                metadata)
    drift = [d for d in diff
             if not (isinstance(d, tuple) and d[0] == "remove_index" and d[1].name in
                     QUERY_INDEXES)]
    assert not drift, drift
