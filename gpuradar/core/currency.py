"""Conversion to USD through the stored reference rates.

The `fx` source stores the ECB's daily rates; conversion always uses the newest stored rate
of each currency. The built-in table below is only a last resort for a database that has
never crawled `fx`, and using it is logged as a warning every time a crawl starts.
"""

from __future__ import annotations

import logging
import math
from datetime import date

log = logging.getLogger(__name__)

# USD per unit, approximate (2026-11). Only used before the first `fx` crawl.
FALLBACK_USD_PER_UNIT: dict[str, float] = {
    "USD": 1.0, "EUR": 1.16, "CNY": 0.141, "GBP": 1.32, "JPY": 0.0066, "HKD": 0.128,
    "SGD": 0.77, "KRW": 0.00070, "INR": 0.0113, "AUD": 0.65, "CAD": 0.71, "CHF": 1.25,
    "BRL": 0.187, "IDR": 0.000060,
}


class FxTable:
    """USD conversion for one crawl: a snapshot of the rates taken when it starts."""

    def __init__(self, stored: dict[str, tuple[float, date, str]] | None = None) -> None:
        self.rates: dict[str, float] = {"USD": 1.0}
        self.dates: dict[str, date] = {}
        self.fallback_used: set[str] = set()
        for cur, (usd_per_unit, rate_date, _origin) in (stored or {}).items():
            self.rates[cur] = usd_per_unit
            self.dates[cur] = rate_date

    def to_usd(self, amount: float, currency: str) -> float | None:
        """`amount` in USD, or None when the currency has no rate at all."""
        currency = currency.upper()
        rate = self.rates.get(currency)
        if rate is None:
            rate = FALLBACK_USD_PER_UNIT.get(currency)
            if rate is None:
                return None
            if currency not in self.fallback_used:
                self.fallback_used.add(currency)
                log.warning("no stored %s rate: converting with gpuradar's built-in fallback "
                            "(%.4f USD); run `gpuradar crawl fx` for the ECB reference rate",
                            currency, rate)
        value = amount * rate
        return value if math.isfinite(value) else None

    def knows(self, currency: str) -> bool:
        c = currency.upper()
        return c in self.rates or c in FALLBACK_USD_PER_UNIT
