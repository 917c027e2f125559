"""Every source gpuradar knows, as Scrapy-free declarations (one module per provider).

`PROVIDERS` is the explicit list: the config schema, the daemon's intervals, the mainland
region alias, the interconnect table, `sources` and `demo` read it, and nothing above the
crawler loads a spider to learn a fact. Each spider in crawler/spiders/ takes its facts from
its declaration (`facts = providers.<name>.<NAME>`); a test checks that this list and
`scrapy list` name the same sources. Adding a provider: a module here, its entry below,
and its spider.
"""

from __future__ import annotations

from gpuradar.core.providers import (
    alibaba,
    autodl,
    aws,
    azure,
    fx,
    gcp,
    huawei,
    lambda_,
    oci,
    runpod,
    tencent,
    vastai,
)
from gpuradar.core.providers.base import KINDS, Family, Provider, family

__all__ = ["BY_NAME", "KINDS", "PROVIDERS", "Family", "Provider", "family", "get", "names"]

#: Every source, in name order (FX included).
PROVIDERS: tuple[Provider, ...] = (
    alibaba.ALIBABA, autodl.AUTODL, aws.AWS, azure.AZURE, fx.FX, gcp.GCP, huawei.HUAWEI,
    lambda_.LAMBDA, oci.OCI, runpod.RUNPOD, tencent.TENCENT, vastai.VASTAI,
)

#: name -> declaration.
BY_NAME: dict[str, Provider] = {p.name: p for p in PROVIDERS}


def names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def get(name: str) -> Provider:
    """The declaration of `name`; KeyError naming the known sources otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(BY_NAME)}") from None
