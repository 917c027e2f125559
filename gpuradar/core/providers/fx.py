"""Exchange rates: the ECB's daily reference rates (CNY and others to USD)."""

from gpuradar.core.providers.base import Provider

FX = Provider(
    name="fx",
    kind="fx",
    default_interval=86400,
    endpoints={"ecb": "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"},
    notes="ECB reference rates, to convert CNY and other currencies to USD.",
)
