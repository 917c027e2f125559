"""Lambda: the instance-types API with a key, else the public pricing page."""

from gpuradar.core.providers.base import Provider, family

LAMBDA = Provider(
    name="lambda",
    kind="lambda",
    default_interval=600,
    endpoints={
        "instance_types": "https://cloud.lambda.ai/api/v1/instance-types",
        "images": "https://cloud.lambda.ai/api/v1/images",
        "pricing": "https://lambda.ai/pricing",
    },
    credentials={"api_key": "LAMBDA_API_KEY"},
    options={"regions": list[str]},
    notes=("API (key): per-region live capacity, price per instance-hour; without a key "
           "the public pricing page: list prices, availability unknown."),
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
