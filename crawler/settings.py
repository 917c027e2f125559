"""Scrapy settings for gpuradar's crawler (`scrapy crawl azure` reads these too).

The config file's `scrapy:` section may change the settings gpuradar.core.config's
`ScrapySection` lists (checked there: type, range, allowed values); nothing else."""

from scrapy.settings import default_settings

from gpuradar.core import defaults

BOT_NAME = "gpuradar"
SPIDER_MODULES = ["gpuradar.crawler.spiders"]
NEWSPIDER_MODULE = "gpuradar.crawler.spiders"

USER_AGENT = "gpuradar/0.1 (+https://github.com/gpuradar/gpuradar)"
ROBOTSTXT_OBEY = False  # official pricing APIs, not crawled sites
TELNETCONSOLE_ENABLED = False
# Scrapy's remote control (on by default in 2.19) would listen for commands and load aiohttp's
# web server into every crawl and the daemon: gpuradar is controlled by its own CLI.
# Left out of the base list, not set to None in EXTENSIONS: Scrapy imports every class named
# there, None or not.
REMOTE_CONTROL_ENABLED = False
EXTENSIONS_BASE = {name: order for name, order in default_settings.EXTENSIONS_BASE.items()
                   if not name.startswith("scrapy.extensions.remote_control.")}
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
LOG_LEVEL = "INFO"
LOG_FORMATTER = "gpuradar.crawler.logformatter.QuietDropLogFormatter"

CONCURRENT_REQUESTS = 8
CONCURRENT_REQUESTS_PER_DOMAIN = 4
# The whole download (large price files on slow links need it); see GPURADAR_ANSWER_TIMEOUT
# for the wait until a provider starts answering.
DOWNLOAD_TIMEOUT = defaults.DOWNLOAD_TIMEOUT
# A hung crawl is closed (and recorded as failed) instead of blocking its schedule slot.
CLOSESPIDER_TIMEOUT = defaults.CRAWL_TIMEOUT

RETRY_ENABLED = True
RETRY_TIMES = 3
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]
# Throttling (429/503, or what a spider's throttle_pause() says) is retried after its pause,
# Retry-After (seconds or an HTTP date) or base * 2**attempt, capped at RETRY_BACKOFF_MAX; the
# pause holds every request to that host, whatever the source's request interval. A longer
# Retry-After is reported, not waited out. GPURADAR_RETRY_SLEEP (tests) replaces the wait.
RETRY_BACKOFF_BASE = 1.0
RETRY_BACKOFF_MAX = 60.0

# Unreachable providers (gpuradar.crawler.middlewares.BackoffRetryMiddleware): a request waits
# at most GPURADAR_ANSWER_TIMEOUT seconds for the response headers (DNS, connect, TLS, first
# answer); a host that never answered gets GPURADAR_CONNECT_ATTEMPTS attempts per request and
# none once its source has waited GPURADAR_UNREACHABLE_AFTER seconds without any answer. Then
# the host is reported once (cause, attempts) and its other requests are dropped: a source that
# cannot be reached gives up within 2 x 12 = 24 s (< 30 s) with these defaults.
GPURADAR_ANSWER_TIMEOUT = 12.0
GPURADAR_CONNECT_ATTEMPTS = 2
GPURADAR_UNREACHABLE_AFTER = 25.0

DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "gpuradar.crawler.middlewares.BackoffRetryMiddleware": 550,
    # Outermost, so that replay answers before anything touches the network and record
    # sees the final response.
    "gpuradar.crawler.middlewares.RecordReplayMiddleware": 50,
    # `parse` and the demo timeline: answers a crawl's requests from saved files.
    "gpuradar.crawler.middlewares.SavedFilesMiddleware": 40,
}

# Spider middlewares that only look at requests, yet step through every item a spider
# yields (1,000 per Azure page): no depth limit, no URL length limit, no meta-copy warning.
SPIDER_MIDDLEWARES = {
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
    # A response a callback cannot read (HTML where JSON is due): one line, not a traceback.
    "gpuradar.crawler.middlewares.UnreadableResponseMiddleware": 50,
    # `parse` and the demo timeline: the saved files instead of the spider's own start, and
    # a parser's error kept whole (before the line above shortens it).
    "gpuradar.crawler.middlewares.SavedFilesMiddleware": 900,
    # Next to the spider: a callback's offers reach the pipelines in batches (PriceBatch),
    # so Scrapy's per-item task, signals and pipeline awaitables are paid once per batch.
    "gpuradar.crawler.middlewares.PriceBatchMiddleware": 950,
}
# Items of one response in the pipelines at once. A callback's offers come as PriceBatches
# of up to GPURADAR_BATCH_SIZE, and the pipelines do not wait on anything: Scrapy's 100
# would only hold a whole large source's offers in memory at once.
CONCURRENT_ITEMS = 2
ITEM_PIPELINES = {
    "gpuradar.crawler.pipelines.ValidatePipeline": 100,
    "gpuradar.crawler.pipelines.NormalizePipeline": 200,
    "gpuradar.crawler.pipelines.StoragePipeline": 300,
}

# --- gpuradar ------------------------------------------------------------------------
# Database the StoragePipeline writes to; None = the embedded SQLite in the user data dir.
GPURADAR_DATABASE_URL = None
# Items per storage transaction, and most offers in one PriceBatch.
GPURADAR_BATCH_SIZE = 1000
# Plausible USD per GPU-hour (low, high): a price outside is quarantined (counted as
# implausible_price, never stored, the offer keeps its last good price). Per source:
# `sources.<name>.price_range: [low, high]` in the config file.
GPURADAR_PRICE_RANGE = defaults.PRICE_RANGE
# Shrink guard: a clean crawl listing fewer offers than this share of the source's last
# successful crawl closes nothing (recorded partial) until the next crawl confirms the drop.
# Per source: `sources.<name>.shrink_guard: 0.3`; 0 turns it off.
GPURADAR_SHRINK_GUARD = defaults.SHRINK_GUARD
# Keep each source's offer state in memory after its crawl (in the crawl service's
# CrawlMemory), so that the service's next crawl of it need not read it back (the daemon);
# a one-shot `gpuradar crawl` frees it.
GPURADAR_KEEP_STATE = True
# Record every response under this directory / answer every request from it.
GPURADAR_RECORD_DIR = None
GPURADAR_REPLAY_DIR = None
# `parse` and the demo timeline: crawl these saved responses ([path, url] pairs) instead of
# the provider (SavedFilesMiddleware); GPURADAR_STORE False keeps every item out of the
# database (`parse`: the pipelines judge and count, nothing is stored, the exchange rates
# are GPURADAR_FX's, a gpuradar.core.currency.FxTable); GPURADAR_STAGED ({"captured": date,
# "at": datetime}) records the crawl at the staged time `at` as a replay of that capture.
GPURADAR_SAVED_FILES = None
GPURADAR_STORE = True
GPURADAR_FX = None
GPURADAR_STAGED = None
# Endpoint overrides, "source.endpoint" -> URL (tests, mirrors): {"azure.prices": "http://..."}
GPURADAR_ENDPOINTS: dict[str, str] = {}
# Per-source options from the config file (credentials, regions, currency, ...).
GPURADAR_SOURCES: dict[str, dict] = {}

# --- Playwright (pages that only render with JavaScript) --------------------------------
# The download handler is installed once, for every spider: a request with
# meta={"playwright": True} is rendered by Chromium; every other request goes through Scrapy's
# own HTTP/1.1 handler unchanged (the Playwright handler delegates to it). The browser
# provider below starts Playwright's driver and Chromium only on the first rendered request,
# so a crawl that never asks for a page pays nothing. The handler needs the asyncio reactor
# (TWISTED_REACTOR above).
# gpuradar's handler is scrapy-playwright's plus the answer deadline above.
DOWNLOAD_HANDLERS = {
    "http": "gpuradar.crawler.handlers.DownloadHandler",
    "https": "gpuradar.crawler.handlers.DownloadHandler",
}
PLAYWRIGHT_BROWSER_PROVIDER = "gpuradar.crawler.playwright.LazyBrowserProvider"
PLAYWRIGHT_BROWSER_TYPE = "chromium"
PLAYWRIGHT_LAUNCH_OPTIONS = {
    "executable_path": "/usr/bin/chromium",
    "headless": True,
    "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
}
PLAYWRIGHT_MAX_CONTEXTS = 2
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 20_000
# Price tables need no images, fonts or media.
PLAYWRIGHT_ABORT_REQUEST = "gpuradar.crawler.playwright.abort_heavy_resources"

