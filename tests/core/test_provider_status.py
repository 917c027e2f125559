"""Each source's status (enabled or not, and why) is told by its provider's Scrapy-free
declaration (gpuradar.core.providers), from the options the config file sets and the
credentials the environment adds (issues #31, #34): `gpuradar sources` reads it without
loading a spider, and the spider reads the same answer (tests/crawler test the wording of
each provider through its spider)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from gpuradar.core import providers
from gpuradar.core.config import source_model

#: No credential of the machine running the tests may leak into a test.
NO_AWS = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
          "AWS_CONFIG_FILE": "/nonexistent/config", "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch):
    for provider in providers.PROVIDERS:
        for env in provider.credentials.values():
            monkeypatch.delenv(env, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    for name, value in NO_AWS.items():
        monkeypatch.setenv(name, value)


def status(name: str, replay: Any = None, **options: Any) -> tuple[bool, str]:
    """Source `name`'s status with these options in its config-file section."""
    return providers.get(name).status(source_model(name)(**options), replay)


def test_a_source_without_its_own_wording_names_its_credentials(monkeypatch):
    assert status("fx") == (True, "public endpoint")
    assert status("vastai") == (
        True, "public endpoint; VAST_API_KEY (or sources.vastai.api_key) would add more")
    monkeypatch.setenv("VAST_API_KEY", "from-env")
    assert status("vastai") == (True, "credentials found")


def test_a_provider_words_its_own_status_from_file_or_environment(monkeypatch):
    assert status("gcp") == (False, "needs a Google Cloud API key with the Cloud Billing "
                                    "API enabled: set GCP_API_KEY or sources.gcp.api_key")
    assert status("gcp", api_key="k") == (True, "API key from sources.gcp.api_key")
    monkeypatch.setenv("GCP_API_KEY", "k")
    assert status("gcp") == (True, "API key from GCP_API_KEY")
    assert status("huawei", access_key="a", secret_key="b", site="intl") == (
        True, "AK/SK found; international site, USD")
    assert status("azure", tenant_id="t") == (True, (
        "public Retail Prices API; the Resource SKUs API and the spot eviction rates "
        "(Resource Graph) are not used: AZURE_CLIENT_ID (or "
        "sources.azure.client_id) and AZURE_CLIENT_SECRET (or sources.azure.client_secret) "
        "and AZURE_SUBSCRIPTION_ID (or sources.azure.subscription_id) missing"))


def test_the_config_file_disables_a_source_whatever_its_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("GCP_API_KEY", "k")
    (tmp_path / "gcp").mkdir()
    (tmp_path / "gcp" / "index.json").write_text("{}")
    assert status("gcp", enabled=False) == (False, "disabled in the config file")
    assert status("gcp", tmp_path, enabled=False) == (False, "disabled in the config file")


def test_a_recording_answers_for_a_source_that_needs_a_key_live(tmp_path):
    (tmp_path / "gcp").mkdir()
    assert status("gcp", tmp_path)[0] is False  # no recording of gcp in the folder yet
    (tmp_path / "gcp" / "index.json").write_text("{}")
    assert status("gcp", tmp_path) == (True, f"replaying the recording in {tmp_path}")
    assert status("gcp", str(tmp_path)) == (True, f"replaying the recording in {tmp_path}")
    assert status("huawei", tmp_path)[0] is False  # only the recorded source


def test_aws_looks_its_credentials_up_with_botocore_without_asking_an_instance_role():
    assert status("aws", spot_history=False) == (
        True, "public price files; per-zone spot prices off (sources.aws.spot_history)")
    assert status("aws", access_key_id="AKIDEXAMPLE", secret_access_key="x") == (
        True, "public price files; AWS credentials found (config-file): per-zone spot prices, "
        "Capacity Block offerings")
    assert status("aws", access_key_id="AKIDEXAMPLE", secret_access_key="x",
                  capacity_blocks=False)[1].endswith("per-zone spot prices")
    assert status("aws", profile="nowhere") == (
        True, "public price files; AWS credentials unusable (ProfileNotFound)")
    assert status("aws") == (True, (
        "public price files; AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "AWS_PROFILE or sources.aws.profile; an instance role is tried at crawl time) would "
        "add per-zone spot prices and Capacity Block offerings (capacity blocks need "
        "credentials)"))


def loaded_by(code: str) -> list[str]:
    """The modules `python -X importtime -c CODE` loads."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, timeout=120,
                          env={**NO_AWS, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "self [us]" not in line]


def test_every_status_is_told_without_scrapy_and_botocore_only_for_aws():
    every = ("from gpuradar.core import providers\n"
             "from gpuradar.core.config import source_model\n"
             "for p in providers.PROVIDERS:\n"
             "    if p.name != 'aws':\n"
             "        assert p.status(source_model(p.name)())[1], p.name\n")
    loaded = loaded_by(every + "providers.get('aws').status(source_model('aws')"
                               "(spot_history=False))\n")
    assert "gpuradar.core.providers" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("scrapy", "twisted", "botocore")
                or m.startswith("gpuradar.crawler")], loaded
    # AWS's credential lookup imports botocore when it is asked, and only then
    loaded = loaded_by(every + "print(providers.get('aws').status(source_model('aws')()))\n")
    assert "botocore" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("scrapy", "twisted")], loaded
