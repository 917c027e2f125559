"""Parse throughput of each source's parser on its recorded responses."""

from __future__ import annotations

import json
import time
from pathlib import Path

from scrapy import Request

from gpuradar.core.items import FxRateItem, PriceItem
from gpuradar.crawler.middlewares import response_for

RECORDINGS = Path(__file__).parent.parent / "gpuradar" / "recordings"


def parse_figures(settings, min_seconds: float = 0.3) -> dict[str, dict[str, float]]:
    from scrapy.utils.reactor import install_reactor, is_reactor_installed
    from scrapy.utils.test import get_crawler

    from gpuradar.crawler.runner import spider_classes

    if not is_reactor_installed():
        install_reactor(settings["TWISTED_REACTOR"])
    classes = spider_classes(settings)
    out = {}
    for rec in sorted(p for p in RECORDINGS.iterdir() if (p / "index.json").exists()):
        if rec.name not in classes:
            continue
        spider = get_crawler(classes[rec.name], settings.copy_to_dict())._create_spider()
        entries = json.loads((rec / "index.json").read_text())
        responses = [response_for(rec / e["file"], Request(e["url"])) for e in entries
                     if e.get("status") == 200]
        items = rounds = 0
        t0 = time.perf_counter()
        try:
            while True:
                for resp in responses:
                    items += sum(isinstance(o, PriceItem | FxRateItem)
                                 for o in spider.parse_file(resp))
                rounds += 1
                if time.perf_counter() - t0 >= min_seconds:
                    break
        except Exception as exc:  # noqa: BLE001 - a broken recording is reported, not fatal
            out[rec.name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        secs = time.perf_counter() - t0
        out[rec.name] = {"items_per_s": items / secs, "items_per_round": items / rounds,
                         "bytes": sum(len(r.body) for r in responses)}
    return out
