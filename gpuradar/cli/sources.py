"""`gpuradar sources`: each source, enabled or not and why, and its last crawls."""

from __future__ import annotations

from datetime import UTC, datetime

from gpuradar.cli.common import (
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    app,
    get_config,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import Format, age, emit
from gpuradar.core.config import scrapy_settings


# -- sources -----------------------------------------------------------------------------
@app.command()
def sources(config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
            as_json: JsonOpt = False, as_csv: CsvOpt = False) -> None:
    """Each source: enabled or not and why, last crawl, staleness."""
    from gpuradar.crawler.runner import spider_classes
    from gpuradar.storage.queries import last_crawls, last_success

    cfg = get_config(config, database_url)
    engine = get_engine(cfg)
    settings = scrapy_settings(cfg)
    latest, ok = last_crawls(engine), last_success(engine)
    now = datetime.now(UTC)
    rows = []
    for name, cls in spider_classes(settings).items():
        enabled, why = cls.status(settings)
        last = latest.get(name) or {}
        interval = cfg.source_options(name).get("interval", cls.default_interval)
        success = ok.get(name)
        stale = success is None or (now - success).total_seconds() > 3 * float(interval)
        rows.append({"source": name, "enabled": enabled, "why": why,
                     "interval_s": interval, "last_status": last.get("status"),
                     "last_items": last.get("items"), "last_error": last.get("error") or "",
                     "last_success": success, "stale": stale if enabled else None,
                     "notes": cls.notes})
    table_rows = [{**r, "enabled": "yes" if r["enabled"] else "no",
                   "last_success": age(r["last_success"], now) + " ago" if r["last_success"]
                   else "never", "stale": {True: "STALE", False: "fresh", None: ""}[r["stale"]],
                   "last_error": r["last_error"][:80]} for r in rows]
    emit(table_rows, [("source", "source"), ("enabled", "enabled"), ("why", "why"),
                      ("last_status", "last crawl"), ("last_items", "items"),
                      ("last_success", "last success"), ("stale", "freshness"),
                      ("last_error", "last error")], pick_format(fmt, as_json, as_csv),
         raw_rows=rows)
