"""Reproducing the market index from an export (`gpuradar index reproduce EXPORT_DIR`): every
published point recomputed with the method and parameters it records, without the
database. Its own module: it reads exports (storage.export) and the index's method
(storage.index), which know nothing of each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuradar.core.marketindex import (
    METHOD_VERSION,
    IndexOffer,
    Params,
    Vote,
    compute_index,
    figure_of,
    judge,
)
from gpuradar.storage.export import read_table
from gpuradar.storage.index import votes_of


def _fresh_in_export(crawls: Sequence[Mapping[str, Any]], at: datetime, params: Params
                     ) -> dict[str, int]:
    """fresh_sources over an export's crawls (the same rule: each source's newest ok crawl's
    data time within stale_after of `at`, fewer than stale_after_failures failures since)."""
    last_ok: dict[str, Mapping[str, Any]] = {}
    for c in crawls:
        if c["status"] == "ok" and (c["source"] not in last_ok
                                    or c["id"] > last_ok[c["source"]]["id"]):
            last_ok[c["source"]] = c
    out = {}
    for source, ok in last_ok.items():
        failures = sum(1 for c in crawls if c["source"] == source and c["id"] > ok["id"]
                       and c["status"] in ("failed", "partial"))
        seen = ok.get("observed_at") or ok["started_at"]
        if failures < params.stale_after_failures and (
                params.stale_after_s is None
                or abs((at - seen).total_seconds()) <= params.stale_after_s):
            out[source] = int(seen.timestamp())
    return out


def _label(row: Mapping[str, Any]) -> str:
    return f"{row['gpu']} {row['pricing']} at {row['at']:%Y-%m-%d %H:%M:%S} UTC"


def reproduce(directory: Path) -> tuple[int, list[str]]:
    """Recompute every published point of an export (`gpuradar export DIR`): (points
    checked, one line per point that does not reproduce). Each point's figures, status and
    digest are recomputed from its votes and the point before it; each point in force is
    also recomputed from the exported offers and crawls (its votes: each fresh provider's
    cheapest listed offer)."""
    index = read_table(directory, "index")
    offers = read_table(directory, "offers")
    crawls = read_table(directory, "crawls")
    index.sort(key=lambda r: (r["gpu"], r["pricing"], r["at"]))
    problems: list[str] = []
    checked = 0
    for n, row in enumerate(index):
        if row["method"] != METHOD_VERSION:
            continue  # a method 1 point stored no inputs
        checked += 1
        params = Params(**row["params"])
        before = index[n - 1] if n and (index[n - 1]["gpu"], index[n - 1]["pricing"]) == (
            row["gpu"], row["pricing"]) else None
        previous = votes_of(before) if before is not None else {}
        last = n + 1 == len(index) or (index[n + 1]["gpu"], index[n + 1]["pricing"]) != (
            row["gpu"], row["pricing"])
        if last:  # in force: its inputs are the exported offers
            fresh = _fresh_in_export(crawls, row["at"], params)
            inputs = [IndexOffer(o["id"], o["gpu"], o["pricing"], o["source"],
                                 o["price_per_gpu_usd"], fresh[o["source"]]) for o in offers
                      if o["active"] and o["available"] is not False
                      and o["price_per_gpu_usd"] is not None and o["gpu"] == row["gpu"]
                      and o["pricing"] == row["pricing"] and o["source"] in fresh]
            figure = compute_index(inputs, params, {(row["gpu"], row["pricing"]): previous}
                                   ).get((row["gpu"], row["pricing"]))
        else:
            votes = [Vote(**{**v, "reason": ""}) for v in row["panel"]]
            figure = figure_of(row["gpu"], row["pricing"], judge(votes, previous, params),
                               params)
        if figure is None:
            figure = figure_of(row["gpu"], row["pricing"], (), params)
        got = (figure.status, figure.median, figure.p10, figure.p90, figure.digest or "")
        want = (row["status"], row["median"], row["p10"], row["p90"], row["digest"])
        if got != want:
            problems.append(f"{_label(row)}: published {_show(want)}, recomputed "
                            f"{_show(got)}")
    return checked, problems


def _show(values: tuple[Any, ...]) -> str:
    status, median, p10, p90, digest = values
    money = "/".join("-" if v is None else f"{v:.6f}" for v in (median, p10, p90))
    return f"{status} median/p10/p90 {money} digest {(digest or '-')[:12]}"
