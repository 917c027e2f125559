"""`gpuradar run`: the background service (scheduler/daemon.py does the work)."""


from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class LogFormat(StrEnum):
    text = "text"
    json = "json"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        config: Annotated[Path | None, typer.Option(
            "--config", "-c", help="Config file (YAML); SIGHUP reloads it.",
            envvar="GPURADAR_CONFIG")] = None,
        database_url: Annotated[str | None, typer.Option(
            "--database-url", help="Database URL (overrides GPURADAR_DATABASE_URL and the "
            "config file).")] = None,
        replay: Annotated[Path | None, typer.Option(
            "--replay", help="Crawl every source from this recording instead of the network, "
            "over and over on its schedule (try the service offline).")] = None,
        log_format: Annotated[LogFormat, typer.Option(
            "--log-format", metavar="<format>", help="text for people, json for log "
            "collectors.",
            envvar="GPURADAR_LOG_FORMAT")] = LogFormat.text,
        log_level: Annotated[LogLevel, typer.Option(
            # the choices in the description: as a metavar they took half the 80-column help
            "--log-level", metavar="<level>", help="debug, info, warning or error; debug "
            "shows Scrapy's and APScheduler's own logs too.",
            envvar="GPURADAR_LOG_LEVEL")] = LogLevel.info,
        metrics_address: Annotated[str | None, typer.Option(
            "--metrics-address", help="Bind address of /metrics, /healthz and /readyz "
            "(config metrics.address; default 127.0.0.1).",
            envvar="GPURADAR_METRICS_ADDRESS")] = None,
        metrics_port: Annotated[int | None, typer.Option(
            "--metrics-port", help="Port of /metrics, /healthz and /readyz (config "
            "metrics.port; default 9108).", envvar="GPURADAR_METRICS_PORT")] = None,
        interval: Annotated[float | None, typer.Option(
            "--interval", metavar="<seconds>", help="Crawl every source every this many "
            "seconds, whatever the config says (demos, replay).",
            min=0.1)] = None,
    ) -> None:
        """Run the service: crawl each source on its schedule, evaluate the rules after
        every crawl, deliver notifications, serve Prometheus metrics and a read-only web
        page. Stops cleanly on SIGTERM/SIGINT; SIGHUP reloads the configuration.

        The web page is at http://127.0.0.1:9109/ by default (config web.address and
        web.port), the JSON API under /api/v1 there: the cheapest offer per GPU, sources,
        firing alerts and price history. `gpuradar serve` serves them alone."""
        from gpuradar.scheduler.daemon import RunOptions
        from gpuradar.scheduler.daemon import run as run_daemon

        if replay is not None and not replay.is_dir():
            from gpuradar.cli.common import fail
            from gpuradar.cli.crawl_cmd import recording_problem

            raise fail(recording_problem(replay))
        code = run_daemon(RunOptions(
            config=config, database_url=database_url, replay=replay,
            log_format=log_format.value, log_level=log_level.value.upper(),
            metrics_address=metrics_address, metrics_port=metrics_port, interval=interval))
        if code:
            raise typer.Exit(code)
