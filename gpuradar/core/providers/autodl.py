"""AutoDL: the machine list (web token) and data-center stock (developer token)."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider


def is_mainland(region: str) -> bool:
    return True  # AutoDL's data centres are all in mainland China


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Either token enables it; each gives different facts, named here."""
    web, dev = bool(opts.get("web_token")), bool(opts.get("dev_token"))
    if not (web or dev):
        return False, ("needs AUTODL_WEB_TOKEN (sources.autodl.web_token: your logged-in "
                       "console token, UNOFFICIAL interface, gives prices and idle GPUs "
                       "per machine) or AUTODL_DEV_TOKEN (sources.autodl.dev_token: "
                       "official developer token, gives idle/total GPUs per data center; "
                       "prices from sources.autodl.prices); AutoDL has no key-less "
                       "price source")
    parts = []
    if web:
        parts.append("web_token: machine list prices (unofficial interface)")
    if dev:
        priced = len(opts.get("prices") or {})
        parts.append(f"dev_token: data-center stock, {priced} GPU price(s) configured")
    return True, "; ".join(parts)


AUTODL = Provider(
    name="autodl",
    describe=describe_status,
    kind="marketplace",
    default_interval=300,
    endpoints={
        "machine_list": "https://www.autodl.com/api/v1/user/machine/list",
        "gpu_stock": "https://api.autodl.com/api/v1/dev/machine/region/gpu_stock",
    },
    credentials={"web_token": "AUTODL_WEB_TOKEN", "dev_token": "AUTODL_DEV_TOKEN"},
    requires_credentials=True,
    options={"regions": list[str], "gpu_names": list[str], "min_idle_gpus": int,
             "page_size": int, "data_centers": list[str], "prices": dict[str, float],
             "data_center": str},
    notes=("Per-GPU hourly CNY prices: machine list (unofficial, web_token) and/or "
           "data-center stock (official dev_token + option prices). No key-less path; cannot "
           "see: bid instances, prices with the developer token alone."),
    # Public clients of the machine list pause 0.2 s between pages.
    request_interval=0.2,
    mainland=is_mainland,
)
