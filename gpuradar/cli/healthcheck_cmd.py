"""`gpuradar healthcheck`: ask a running `gpuradar run` whether it is healthy.

For container and orchestrator health checks: it reads the configuration `run` reads (the
config file, GPURADAR_CONFIG, GPURADAR_METRICS_PORT / GPURADAR_METRICS_ADDRESS, `metrics:`)
so it probes the port the service really listens on, not a fixed URL. It cannot see another
process's command line: a port given to `run --metrics-port` must be given here too.

Exit 0 when /healthz answers 200, 1 otherwise (never 2: Docker reserves it), with one line.
"""


from typing import Annotated

import typer

from gpuradar.cli.common import ConfigOpt
from gpuradar.core.units import EXIT_FAILED

# A service listening on every address is asked on the loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def healthz_url(address: str, port: int) -> str:
    """Where a service bound to address:port answers /healthz from this host."""
    host = _WILDCARDS.get(address, address)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/healthz"


def probe(url: str, timeout: float) -> tuple[bool, str]:
    """(healthy, one line saying why) from a GET of `url`."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read(2000).decode("utf-8", "replace")
            return reply.status == 200, f"{url}: {reply.status} {' '.join(body.split())}"
    except urllib.error.HTTPError as exc:
        body = exc.read(2000).decode("utf-8", "replace")
        return False, f"{url}: {exc.code} {' '.join(body.split())}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url}: no answer ({reason})"


def register(app: typer.Typer) -> None:
    @app.command()
    def healthcheck(
        config: ConfigOpt = None,
        metrics_address: Annotated[str | None, typer.Option(
            "--metrics-address", help="Address `run` listens on (as `run --metrics-address`).",
            envvar="GPURADAR_METRICS_ADDRESS")] = None,
        metrics_port: Annotated[int | None, typer.Option(
            "--metrics-port", help="Port `run` listens on (as `run --metrics-port`).",
            envvar="GPURADAR_METRICS_PORT")] = None,
        timeout: Annotated[float, typer.Option(
            "--timeout", help="Seconds to wait for the answer.", min=0.1)] = 8.0,
    ) -> None:
        """Ask the running service's /healthz, where `gpuradar run` with the same
        configuration and environment listens: exit 0 when healthy, 1 otherwise."""
        from gpuradar.core.config import ConfigError, load_config
        from gpuradar.scheduler.jobs import metrics_options

        try:
            opts = metrics_options(load_config(config), metrics_address, metrics_port)
        except ConfigError as exc:
            typer.echo(f"unhealthy: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from None
        if not opts.enabled:
            typer.echo("unhealthy: the metrics endpoint is disabled (metrics.enabled: false), "
                       "so there is no /healthz to ask", err=True)
            raise typer.Exit(EXIT_FAILED)
        ok, line = probe(healthz_url(opts.address, opts.port), timeout)
        typer.echo(f"{'healthy' if ok else 'unhealthy'}: {line}", err=not ok)
        if not ok:
            raise typer.Exit(EXIT_FAILED)
