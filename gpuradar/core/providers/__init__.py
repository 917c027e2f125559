"""Every source gpuradar knows, as Scrapy-free declarations (one module per provider).

The list is discovered, not kept by hand: every module of this package but `base` declares
one `Provider` at module level, and `PROVIDERS` holds them in name order. The config schema,
the daemon's intervals, the mainland region alias, the interconnect table, `sources`, rules,
the web page, the API, exports, metrics and `demo` read it, and nothing above the crawler
loads a spider to learn a fact. Each spider in crawler/spiders/ takes its facts from its
declaration, imported from its module
(`from gpuradar.core.providers.lambda_ import LAMBDA`); a test checks that this list and
`scrapy list` name the same sources. Adding a provider: a module here and its spider
(docs/providers.md, "Adding a provider").
"""

from __future__ import annotations

import importlib
import pkgutil

from gpuradar.core.providers.base import KINDS, Family, Provider, family

__all__ = ["BY_NAME", "KINDS", "PROVIDERS", "Family", "Provider", "family", "get", "names"]

#: Modules of this package that are not a provider's declaration.
_NOT_PROVIDERS = frozenset({"base"})


def _discover() -> tuple[Provider, ...]:
    """The one Provider each module of this package declares, in name order. A module with
    none or several is a mistake worth stopping on: its source would silently vanish."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name in _NOT_PROVIDERS or module.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{module.name}")
        declared = [v for v in vars(mod).values() if isinstance(v, Provider)]
        if len(declared) != 1:
            raise ImportError(f"{mod.__name__} declares {len(declared)} Provider objects; "
                              "a provider module declares exactly one")
        found.append(declared[0])
    return tuple(sorted(found, key=lambda p: p.name))


#: Every source, in name order (FX included).
PROVIDERS: tuple[Provider, ...] = _discover()

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
