"""`gpuradar serve`: the web page and the JSON API alone, read-only and stateless
(scheduler/server.py does the work): as many replicas as readers need, none of them a
crawler."""

import signal
from typing import Annotated, Any

import typer

from gpuradar.cli.common import ConfigOpt, DbOpt, app, fail, get_config, read_engine


@app.command()
def serve(
    config: ConfigOpt = None,
    database_url: DbOpt = None,
    address: Annotated[str | None, typer.Option(
        "--address", help="Bind address (config web.address; default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="Port (config web.port; default 9109; 0: any free port).", min=0,
        max=65535)] = None,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="Worker threads drawing answers not yet cached (config "
        "web.threads; default 4).", min=1, max=64)] = None,
) -> None:
    """Serve the web page at / and the JSON API under /api/v1 from the database, on a
    production HTTP/1.1 server (keep-alive, gzip, answers cached per data version), without
    crawling or writing anything. Stops on SIGTERM/SIGINT."""
    from gpuradar.core.logs import REDACT
    from gpuradar.scheduler.health import EndpointError
    from gpuradar.scheduler.server import ReadServer, read_app
    from gpuradar.storage.db import redact_url

    cfg = get_config(config, database_url)
    url = cfg.reader_url
    engine = read_engine(url)
    web = cfg.web
    try:
        server = ReadServer(read_app(lambda: engine, REDACT, cors=cfg.metrics.cors_origins,
                                     threads=threads or web.threads),
                            address or web.address, web.port if port is None else port)
    except EndpointError as exc:
        raise fail(f"{exc}; set --port / web.port") from None

    def stop(signum: int, frame: Any) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    typer.echo(f"serving the web page on {server.url}/ and the API on {server.url}/api/v1 "
               f"(database {redact_url(url)})", err=True)
    server.run()

