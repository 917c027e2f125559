"""A Scrapy settings module for crawls whose waits are recorded instead of slept: gpuradar's
settings plus GPURADAR_RETRY_SLEEP pointing at `record`, which appends each wait (seconds) to
the file named by GPURADAR_TEST_WAITS. Used through SCRAPY_SETTINGS_MODULE in a subprocess."""

import os

from gpuradar.crawler.settings import *  # noqa: F403

GPURADAR_RETRY_SLEEP = "tests.crawler.retry_waits.record"


async def record(seconds: float) -> None:
    with open(os.environ["GPURADAR_TEST_WAITS"], "a") as out:
        out.write(f"{seconds!r}\n")
