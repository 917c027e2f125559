"""Realistic, deterministic crawls: offers shaped like the eleven sources' real responses,
with list prices that change slowly and marketplace offers that come and go."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpuradar.core.items import PriceItem

# source -> (regions, (gpu, count, typical USD per GPU-hour), currency, marketplace?)
SHAPES: dict[str, tuple[list[str], list[tuple[str, int, float]], str, bool]] = {
    "aws": ([f"{a}-{b}-{n}" for a in ("us", "eu", "ap") for b in ("east", "west", "south")
             for n in (1, 2)], [("H100-SXM-80GB", 8, 6.9), ("A100-SXM-40GB", 8, 4.1),
                                ("L4", 1, 0.8), ("A10G", 1, 1.0), ("T4", 1, 0.5),
                                ("L40S", 4, 1.9)], "USD", False),
    "gcp": ([f"{a}-{b}{n}" for a in ("us", "europe", "asia") for b in ("central", "west")
             for n in (1, 2, 4)], [("H100-SXM-80GB", 8, 11.0), ("A100-SXM-80GB", 8, 5.0),
                                   ("L4", 1, 0.7), ("T4", 1, 0.35)], "USD", False),
    "azure": ([f"{r}{n}" for r in ("eastus", "westus", "westeurope", "japaneast")
               for n in ("", "2", "3")], [("H100-SXM-80GB", 8, 12.3), ("A100-PCIE-80GB", 1, 3.7),
                                         ("T4", 1, 0.53), ("A10", 1, 2.7)], "USD", False),
    "oci": (["global"], [("H100-SXM-80GB", 8, 10.0), ("A10", 1, 2.0)], "USD", False),
    "alibaba": ([f"cn-{c}" for c in ("hangzhou", "beijing", "shanghai", "shenzhen")],
                [("A10", 1, 12.0), ("T4", 1, 8.0), ("L20", 1, 15.0)], "CNY", False),
    "tencent": ([f"ap-{c}" for c in ("guangzhou", "shanghai", "beijing")],
                [("T4", 1, 9.0), ("A10", 1, 13.0), ("H800-SXM-80GB", 8, 60.0)], "CNY", False),
    "huawei": (["cn-north-4", "cn-east-3", "cn-south-1"],
               [("ASCEND-910B", 8, 30.0), ("V100-32GB", 1, 20.0)], "CNY", False),
    "lambda": (["us-east-1", "us-west-1", "us-south-1"],
               [("H100-SXM-80GB", 8, 2.99), ("A100-SXM-40GB", 1, 1.29)], "USD", False),
    "runpod": (["secure", "community"],
               [("H100-SXM-80GB", 1, 2.69), ("RTX-4090", 1, 0.34), ("L40S", 1, 0.79)],
               "USD", True),
    "vastai": (["US", "CA", "SE", "PL", "DE"],
               [("RTX-4090", 1, 0.31), ("H100-SXM-80GB", 1, 1.39), ("RTX-3090", 1, 0.18),
                ("A100-SXM-80GB", 8, 0.95)], "USD", True),
    "autodl": (["west-B", "beijing-A", "nm-B1"], [("RTX-4090", 1, 2.2), ("L20", 1, 2.8)],
               "CNY", True),
}
CNY_USD = 0.141


@dataclass
class Workload:
    """N offers spread over the sources; each `crawl()` changes `change` of the prices and
    replaces `churn` of the marketplace offers."""

    n: int
    change: float = 0.02
    churn: float = 0.01
    seed: int = 42
    rng: random.Random = field(init=False)
    offers: dict[str, list[list]] = field(init=False)
    serial: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.offers = {s: [] for s in SHAPES}
        weights = {s: 3 if SHAPES[s][3] else 1 for s in SHAPES}
        total = sum(weights.values())
        for source, w in weights.items():
            for _ in range(max(1, self.n * w // total)):
                self.offers[source].append(self._new(source))

    def _new(self, source: str) -> list:
        regions, gpus, currency, _ = SHAPES[source]
        gpu, count, usd = self.rng.choice(gpus)
        self.serial += 1
        base = usd * count / (CNY_USD if currency == "CNY" else 1)
        price = round(base * self.rng.uniform(0.7, 1.3), 4)
        pricing = self.rng.choice(("on_demand", "spot"))
        return [self.rng.choice(regions), f"{source}-{gpu}-{self.serial}", pricing, gpu, count,
                price, currency]

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.offers.values())

    def step(self) -> None:
        """Move the market on by one crawl interval."""
        for source, offers in self.offers.items():
            for offer in self.rng.sample(offers, int(len(offers) * self.change)):
                offer[5] = round(offer[5] * self.rng.uniform(0.9, 1.1), 4)
            if SHAPES[source][3]:
                for i in self.rng.sample(range(len(offers)), int(len(offers) * self.churn)):
                    offers[i] = self._new(source)

    def crawl(self, source: str, at: datetime) -> list[PriceItem]:
        out = []
        for region, itype, pricing, gpu, count, price, currency in self.offers[source]:
            usd = price * (CNY_USD if currency == "CNY" else 1.0)
            out.append(PriceItem(source=source, region=region, instance_type=itype,
                                 pricing=pricing, gpu=gpu, gpu_count=count, price=price,
                                 currency=currency, available=True, observed_at=at,
                                 price_usd=round(usd, 6), price_per_gpu_usd=round(usd / count, 6)))
        return out

    def crawls(self, start: datetime, every: timedelta, count: int):
        """(time, {source: items}) for `count` successive crawls of every source."""
        for k in range(count):
            at = start + every * k
            if k:
                self.step()
            yield at, {s: self.crawl(s, at) for s in SHAPES}
