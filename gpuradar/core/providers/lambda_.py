"""Lambda: the instance-types API with a key, else the public pricing page."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider, family


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Live availability with a key, list prices from the public page without."""
    if opts.get("api_key"):
        return True, "API key found: instance-types API, live availability per region"
    return True, ("public pricing page (list prices, availability unknown); "
                  "LAMBDA_API_KEY (or sources.lambda.api_key) adds live per-region "
                  "availability")


LAMBDA = Provider(
    name="lambda",
    describe=describe_status,
    kind="lambda",
    default_interval=600,
    endpoints={
        "instance_types": "https://cloud.lambda.ai/api/v1/instance-types",
        "pricing": "https://lambda.ai/pricing",
    },
    credentials={"api_key": "LAMBDA_API_KEY"},
    # Without a key it reads the public pricing page, and is then as polite as a page source
    # (robots.txt, conditional requests); with one it asks the API.
    page_mode=lambda opts: not opts.get("api_key"),
    options={"regions": list[str]},
    notes=("API (key): one offer per region with capacity, price per instance-hour; without "
           "a key the public pricing page: list prices, region 'global', availability "
           "unknown; cannot see: regions without capacity, reserved 1-Click Clusters."),
    # The public API allows about one request per second per key.
    request_interval=1.0,
    # Lambda's instance-type names state the form factor (`..._sxm5`, `..._pcie`); its
    # pricing page (lambda.ai/pricing) describes the 8x SXM on-demand instances as NVIDIA HGX
    # with NVSwitch, InfiniBand only on 1-Click Clusters (not listed as offers); the 8x V100
    # instance is an NVLink (HGX-1) machine.
    # fmt: off
    interconnect=(
        family(r"v100", "nvlink", None, "V100 NVLink"),
        family(r"sxm", "nvswitch", None,
               "HGX SXM NVSwitch; InfiniBand only on 1-Click Clusters"),
        family(r"pcie", "pcie", None, "PCIe GPUs"),
    ),
    # fmt: on
)
