"""The installed layout: one package, `gpuradar`, whose layers import only downwards.

The repository keeps crawler/, storage/, alerts/ and scheduler/ at its top level;
gpuradar/crawler, gpuradar/storage, ... link to them, so the package's tree as installed is
what setuptools ships and what import-linter, ruff and mypy read from the repository root.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built once per run: pytest-xdist workers share the run's base folder, and
    the first to take the lock builds it for the others."""
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()  # a worker's: popen-gwN in the run's folder
    shared = (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "wheel"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not list(shared.glob("gpuradar-*.whl")):
            subprocess.run([str(BIN / "uv"), "build", "-q", "--wheel", "-o", str(shared),
                            str(REPO)], check=True, capture_output=True, timeout=300)
    return next(shared.glob("gpuradar-*.whl"))


def test_the_wheel_installs_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"gpuradar"}
    for part in ("crawler/spiders/azure.py", "storage/migrations/env.py",
                 "alerts/templates/email.html.j2", "scheduler/daemon.py", "core/units.py",
                 "cli/__init__.py"):
        assert f"gpuradar/{part}" in names, part
    assert any(n.startswith("gpuradar/recordings/") for n in names)
    # every module and every recording of the tree is shipped (a package missing from
    # pyproject's list would install a gpuradar that fails on import)
    tree = {"gpuradar": REPO / "gpuradar", "gpuradar/crawler": REPO / "crawler",
            "gpuradar/storage": REPO / "storage", "gpuradar/alerts": REPO / "alerts",
            "gpuradar/scheduler": REPO / "scheduler"}
    expected = {f"{prefix}/{path.relative_to(root).as_posix()}"
                for prefix, root in tree.items() for path in root.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts
                and (path.suffix == ".py" or "recordings" in path.parts)
                and path.name != ".keep"}
    assert expected - set(names) == set()


@pytest.mark.parametrize("where", ["repository", "wheel"])
def test_layers_are_kept(wheel, tmp_path, where):
    """import-linter's contract, from the repository root (gpuradar/crawler, ... link to
    the top-level folders, so the tool sees the installed tree) and on the built wheel."""
    if where == "wheel":
        zipfile.ZipFile(wheel).extractall(tmp_path)
    done = subprocess.run([str(BIN / "lint-imports"), str(REPO / "pyproject.toml"),
                           "--no-cache"], cwd=REPO if where == "repository" else tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout
    analysed = int(re.search(r"Analyzed (\d+) files", done.stdout)[1])
    assert analysed > 100  # every layer's modules, not only gpuradar/ itself


def test_scrapy_project_still_works_from_the_repository_root():
    done = subprocess.run([str(BIN / "scrapy"), "list"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {"aws", "azure", "gcp", "vastai", "autodl"} <= set(done.stdout.split())


def test_every_provider_fact_comes_from_its_declaration():
    """The list of declarations (gpuradar.core.providers) is the list `scrapy list` prints;
    kinds, intervals, endpoints, options, credentials, the mainland rule and the status are
    read from the declarations, and each spider takes its facts from its own, so a fact has
    one home and core never loads a spider to learn one."""
    from gpuradar.core import providers, sources
    from gpuradar.core.config import Config
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes
    from gpuradar.crawler.spiders.base import FACTS
    from gpuradar.scheduler.jobs import KINDS

    listed = subprocess.run([str(BIN / "scrapy"), "list"], cwd=REPO, capture_output=True,
                            text=True, timeout=120, check=True).stdout.split()
    assert [p.name for p in providers.PROVIDERS] == sorted(listed)
    assert list(sources.providers()) == sorted(listed)
    spiders = spider_classes(scrapy_settings(Config(database_url="sqlite://")))
    assert list(spiders) == sorted(listed)
    for name, cls in spiders.items():
        assert cls.facts is providers.get(name), name
        for attr in FACTS:
            assert getattr(cls, attr) == getattr(cls.facts, attr), (name, attr)
        # the status is the declaration's too: no spider words its own
        assert not {"status", "describe_status"} & set(vars(cls)), name
    assert set(sources.price_sources()) == set(listed) - {"fx"}
    for name in listed:
        assert sources.source_kind(name) in KINDS, name
        assert sources.default_interval(name) > 0, name
    assert set(sources.mainland_sources()) == {"alibaba", "tencent", "huawei", "autodl"}
    assert sources.is_mainland("alibaba", "cn-beijing")
    assert not sources.is_mainland("alibaba", "cn-hongkong")
    assert sources.is_mainland("huawei", "cn-north-4")
    assert not sources.is_mainland("huawei", "ap-southeast-1")
    assert sources.is_mainland("tencent", "ap-guangzhou")
    assert not sources.is_mainland("tencent", "ap-hongkong")
    assert sources.is_mainland("autodl", "west-b")
    assert not sources.is_mainland("aws", "cn-north-1x")


def test_a_spider_cannot_write_a_fact_its_declaration_holds():
    """A spider that sets `endpoints` (or any other declared fact) beside its `facts` is
    refused when its class is made: the second copy would drift from the one core reads."""
    from gpuradar.core.providers.azure import AZURE
    from gpuradar.crawler.spiders.base import GpuRadarSpider

    with pytest.raises(TypeError, match=r"sets endpoints, notes: these come from its "
                                        r"declaration, gpuradar.core.providers \('azure'\)"):
        type("Azure2", (GpuRadarSpider,), {"facts": AZURE,
                                           "endpoints": {}, "notes": "x"})


CORE_MODULES = ("gpuradar.core.config", "gpuradar.core.sources", "gpuradar.core.interconnect",
                "gpuradar.core.units")


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_imports_neither_scrapy_nor_the_crawler(module):
    """`python -X importtime` lists every module an import loads: importing core (and asking
    it a mainland-region question, a config schema and an interconnect) loads no Scrapy
    module and no gpuradar.crawler module."""
    code = (f"import {module}\n"
            "from gpuradar.core.units import region_matches\n"
            "from gpuradar.core.config import schema\n"
            "from gpuradar.core.interconnect import interconnect_for\n"
            "assert region_matches('cn-beijing', '', ['mainland'], 'alibaba')\n"
            "schema()\n"
            "interconnect_for('azure', 'Standard_ND96is_H100_v5', 'H100-SXM-80GB', 8)\n")
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
              if line.startswith("import time:")]
    assert "gpuradar.core.providers" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "scrapy"
                or m.startswith("gpuradar.crawler")], loaded


def test_no_import_cycles(wheel, tmp_path):
    """No module imports, directly or through others, a module that imports it back
    (function-level imports included): each layer reads as a tree."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    script = (
        "import sys, grimp\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "g = grimp.build_graph('gpuradar', cache_dir=None)\n"
        "index, low, stack, on, cycles = {}, {}, [], set(), []\n"
        "sys.setrecursionlimit(10000)\n"
        "def visit(v):\n"
        "    index[v] = low[v] = len(index); stack.append(v); on.add(v)\n"
        "    for w in g.find_modules_directly_imported_by(v):\n"
        "        if w not in index:\n"
        "            visit(w); low[v] = min(low[v], low[w])\n"
        "        elif w in on:\n"
        "            low[v] = min(low[v], index[w])\n"
        "    if low[v] == index[v]:\n"
        "        part = []\n"
        "        while True:\n"
        "            w = stack.pop(); on.discard(w); part.append(w)\n"
        "            if w == v: break\n"
        "        if len(part) > 1: cycles.append(sorted(part))\n"
        "for m in sorted(g.modules):\n"
        "    if m not in index: visit(m)\n"
        "print(cycles)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_readme_source_table_states_each_default_interval():
    """The README's table of sources says how often each is crawled by default: it is the
    provider's declared `default_interval`, which the daemon uses."""
    from gpuradar.core import sources
    from gpuradar.core.units import parse_duration

    text = README.read_text()
    block = text[text.index("| source | reads |"):].split("\n\n", 1)[0]
    table = {}
    for row in re.findall(r"^\| `(\w+)` \|.*\| ([^|]+) \|$", block, re.M):
        name, every = row
        table[name] = parse_duration(every.strip().replace(" min", "m").replace(" h", "h")
                                     .replace(" day", "d")).total_seconds()
    assert table == {name: sources.default_interval(name) for name in sources.providers()}


# -- no private name crosses a module ------------------------------------------------------------
#: The product's source folders and the module each is (gpuradar/<folder> links to them).
PACKAGE_DIRS = {"gpuradar": REPO / "gpuradar", "gpuradar.crawler": REPO / "crawler",
                "gpuradar.storage": REPO / "storage", "gpuradar.alerts": REPO / "alerts",
                "gpuradar.scheduler": REPO / "scheduler"}


def product_modules() -> dict[str, Path]:
    """Every module of the product, by its installed name."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _where(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def private_uses(module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """`from x import _name` and `x._name` in `module` where x is another module of the
    product (the private name of its own module, or a private attribute of an object, is
    not a module's private name)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[str] = []
    aliases: dict[str, str] = {}  # a local name bound to another module of the product
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                if base in modules and base != module and _private(alias.name):
                    found.append(f"{_where(path)}:{node.lineno}: from {base} import "
                                 f"{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases
                and aliases[node.value.id] != module):
            found.append(f"{_where(path)}:{node.lineno}: "
                         f"{aliases[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is its module's own: another module of the product
    that needs it needs a public name (tests may reach into privates; the product may not)."""
    modules = product_modules()
    found = [use for module, path in sorted(modules.items())
             for use in private_uses(module, path, modules)]
    assert not found, "\n".join(found)


def test_the_private_name_check_sees_both_forms(tmp_path):
    """The check above finds `from x import _name` and `x._name`, and lets a module use its
    own private names and a dunder."""
    modules = product_modules()
    path = tmp_path / "probe_private.py"  # read as if it were gpuradar/alerts/probe_private
    path.write_text("from gpuradar.alerts import rules\n"
                    "from gpuradar.alerts.grammar import _close\n"
                    "from gpuradar import __version__\n"
                    "from gpuradar.alerts.probe_private import _mine\n"
                    "rules._as_list('a')\n")
    found = private_uses("gpuradar.alerts.probe_private", path, modules)
    assert [f.split(": ", 1)[1] for f in found] == [
        "from gpuradar.alerts.grammar import _close", "gpuradar.alerts.rules._as_list"]


def test_the_type_checker_is_clean_on_the_whole_package():
    """`mypy -p gpuradar`, configured in pyproject.toml (check_untyped_defs, the pydantic
    and zope plugins, no global ignore_missing_imports), finds no error in any layer. It
    reads the package through the links in gpuradar/, as installed."""
    done = subprocess.run([sys.executable, "-m", "mypy", "-p", "gpuradar"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def _mypy_config() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]


def test_the_type_checker_is_strict_and_names_each_untyped_package():
    """A missing stub is an error, except for the packages named one by one, and each of
    those still ships no types: an override outlives its reason only until this fails."""
    import importlib.util

    config = _mypy_config()
    assert config["check_untyped_defs"] is True
    assert "ignore_missing_imports" not in config
    named = [m for o in config["overrides"] if o.get("ignore_missing_imports")
             for m in ([o["module"]] if isinstance(o["module"], str) else o["module"])]
    assert named
    for module in named:
        top = module.removesuffix(".*")
        spec = importlib.util.find_spec(top)
        assert spec is not None and spec.submodule_search_locations, f"{top} is not installed"
        package = Path(next(iter(spec.submodule_search_locations)))
        assert not (package / "py.typed").exists(), f"{top} ships types: drop its override"
        assert not (package.parent / f"{top}-stubs").exists(), f"{top} has stubs installed"
