"""The configuration in force: the file (if any) read with its locations, the environment
variables that set keys of it and the command line's database URL, checked by the schema
once."""

from __future__ import annotations

import importlib
import os
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

from gpuradar.core import providers
from gpuradar.core.config.errors import (
    ConfigError,
    Key,
    Marks,
    SettingNames,
    shown,
    validate_section,
)
from gpuradar.core.config.paths import (
    ENV_KEYS,
    SCRAPY_SETTINGS_MODULE,
    default_config_path,
    default_database_url,
)
from gpuradar.core.config.sections import (
    KNOWN_KEYS,
    AlertsSection,
    DaemonSection,
    MetricsSection,
    ScrapySection,
    SourceOptions,
    TargetSpec,
    WebSection,
    schema,
    source_model,
)
from gpuradar.core.config.values import Section
from gpuradar.core.config.yamlfile import read_yaml
from gpuradar.core.text import excerpt

#: The sections of the file a Config carries, each as its model (see Config).
SECTIONS = ("sources", "endpoints", "targets", "rules", "alerts", "metrics", "web",
            "daemon", "scrapy")


@dataclass
class Config:
    """The configuration in force, checked by the schema once: each section as its model.

    `sources` holds the sources the file configures (each its provider's options model;
    `source_options` gives any source's), `targets` a TargetSpec per name, `alerts`,
    `metrics`, `daemon` and `scrapy` their section models. A Config built from plain data
    (a program, a test) has those sections checked here, like the file's."""

    database_url: str
    #: where the readers (serve, export, gpuradar.open) read, when not the database itself
    read_database_url: str | None = None
    sources: dict[str, SourceOptions] = field(default_factory=dict)
    endpoints: dict[str, str] = field(default_factory=dict)
    targets: dict[str, TargetSpec] = field(default_factory=dict)
    rules: list[Any] = field(default_factory=list)
    rules_file: Path | None = None
    alerts: AlertsSection = field(default_factory=AlertsSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    web: WebSection = field(default_factory=WebSection)
    daemon: DaemonSection = field(default_factory=DaemonSection)
    scrapy: ScrapySection = field(default_factory=ScrapySection)
    path: Path | None = None
    marks: Marks | None = None
    #: load_config's sections are its checked model's: nothing to check again
    checked: InitVar[bool] = False

    def __post_init__(self, checked: bool) -> None:
        if not checked:
            plain = {name: getattr(self, name) for name in SECTIONS
                     if not _is_model(name, getattr(self, name))}
            if plain:
                model = validate_section(schema(), plain, (), self.located())
                for name, value in sections_of(model).items():
                    if name in plain:
                        setattr(self, name, value)

    @property
    def options(self) -> dict[str, SourceOptions]:
        """Every known source's options, the file's or else its defaults, as passed down
        (scrapy_settings puts them in GPURADAR_SOURCES for the spiders). Built when asked:
        a command that reads only the database builds no source's model."""
        return {p.name: self.source_options(p.name) for p in providers.PROVIDERS} | \
            self.sources

    @property
    def reader_url(self) -> str:
        """The database the read-only commands read: a replica's when one is set."""
        return self.read_database_url or self.database_url

    def source_options(self, name: str) -> SourceOptions:
        """The options of source `name`: as the file sets them, else its defaults (as
        written in the model: there is nothing to check)."""
        return self.sources.get(name) or source_model(name).model_construct()

    def located(self) -> Marks:
        return self.marks or Marks(path=self.path)

    def where(self, *keys: str | int) -> str:
        """'file:line' of a key (or the environment variable that set it)."""
        return self.located().where(keys)

    def error(self, keys: Key, message: str) -> ConfigError:
        """A ConfigError about the key at `keys`, located."""
        return ConfigError(self.located().problem(keys, message))


def _is_model(name: str, value: Any) -> bool:
    """Whether a section given to Config is in its checked form already."""
    if name == "sources":
        return all(isinstance(v, SourceOptions) for v in value.values())
    if name == "targets":
        return all(isinstance(v, TargetSpec) for v in value.values())
    if name in ("endpoints", "rules"):
        return not value  # plain data either way: checked unless empty
    return isinstance(value, Section)


def sections_of(model: Any) -> dict[str, Any]:
    """The sections of a checked file (schema()'s model) as Config carries them."""
    sources = model.sources
    return {
        "sources": {n: v for n in type(sources).model_fields
                    if (v := getattr(sources, n)) is not None},
        "endpoints": dict(model.endpoints), "targets": dict(model.targets),
        "rules": list(model.rules), "alerts": model.alerts, "metrics": model.metrics,
        "web": model.web,
        "daemon": model.daemon, "scrapy": model.scrapy,
    }


def _env_value(keys: Key, text: str) -> Any:
    if keys in (("metrics", "port"), ("web", "port")):
        try:
            return int(text)
        except ValueError:
            return text
    if keys == ("web", "enabled"):  # anything else is refused by the schema, with the text
        return {"true": True, "false": False}.get(text.strip().lower(), text)
    return text


def load_config(path: Path | str | None = None, *, database_url: str | None = None,
                scrapy_names: SettingNames | None = None) -> Config:
    """Read the config file (if any) and the environment, and check them against the schema.

    `database_url` is the command line's (it wins over GPURADAR_DATABASE_URL and the file).
    `scrapy_names` tells a Scrapy setting gpuradar refuses from a misspelt one in `scrapy:`
    (gpuradar.crawler.crawl_settings.scrapy_setting_names; core itself never loads Scrapy)."""
    check_settings_module()
    path = Path(path) if path else default_config_path()
    marks = Marks(path=path)
    raw: Any = {}
    if path is not None:
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        raw = read_yaml(path, marks)
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of keys "
                              f"({', '.join(KNOWN_KEYS)})")
    for env, keys in ENV_KEYS.items():
        value = os.environ.get(env)
        if value:
            section = raw
            for k in keys[:-1]:
                section = section.setdefault(k, {}) if isinstance(section, dict) else None
            if isinstance(section, dict):
                section[keys[-1]] = _env_value(keys, value)
                marks.origins[keys] = f"environment variable {env}"
    if database_url:  # the command line names the one database this command uses
        raw["database_url"] = database_url
        raw.pop("read_database_url", None)
        marks.origins[("database_url",)] = "--database-url"
    named = raw.get("sources")  # only the sources the file names get their model built
    model = validate_section(schema(named if isinstance(named, dict) else ()), raw, (), marks,
                             scrapy_names=scrapy_names)
    rules_file = Path(model.rules_file) if model.rules_file else None
    if rules_file is not None and not rules_file.is_absolute() and path is not None:
        rules_file = path.parent / rules_file

    return Config(database_url=str(model.database_url or default_database_url()),
                  read_database_url=model.read_database_url,
                  rules_file=rules_file, path=path, marks=marks, checked=True,
                  **sections_of(model))


def check_settings_module() -> None:
    """A SCRAPY_SETTINGS_MODULE other than gpuradar's must import, and the settings of it that
    the `scrapy:` section could set must pass the same checks; ConfigError in one line."""
    name = os.environ.get("SCRAPY_SETTINGS_MODULE")
    if not name or name == SCRAPY_SETTINGS_MODULE:
        return
    where = f"environment variable SCRAPY_SETTINGS_MODULE={shown((), name)}"
    try:
        module = importlib.import_module(name)
    except SystemExit as exc:  # sys.exit(0) in it would end the command with success
        raise ConfigError(f"{where}: calls sys.exit({excerpt(exc.code)}) when imported; unset "
                          f"it to use gpuradar's settings ({SCRAPY_SETTINGS_MODULE})") from None
    except Exception as exc:  # noqa: BLE001 - whatever the module raises, one line
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ConfigError(f"{where}: cannot be imported ({type(exc).__name__}: {detail}); "
                          f"unset it to use gpuradar's settings ({SCRAPY_SETTINGS_MODULE})"
                          ) from None
    values = {k: list(v) if isinstance(v, tuple) else v for k in ScrapySection.model_fields
              if (v := getattr(module, k, None)) is not None}
    marks = Marks(origins={(k,): f"{where} (module {module.__name__})" for k in values})
    validate_section(ScrapySection, values, (), marks)
