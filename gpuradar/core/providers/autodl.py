"""AutoDL: the machine list (web token) and data-center stock (developer token)."""

from gpuradar.core.providers.base import Provider


def is_mainland(region: str) -> bool:
    return True  # AutoDL's data centres are all in mainland China


AUTODL = Provider(
    name="autodl",
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
           "data-center stock (official dev_token + option prices). No key-less path."),
    # Public clients of the machine list pause 0.2 s between pages.
    request_interval=0.2,
    mainland=is_mainland,
)
