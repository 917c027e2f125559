"""Playwright (through scrapy-playwright) for pages that only render with JavaScript."""

from __future__ import annotations


def abort_heavy_resources(request) -> bool:
    """Skip what a rendered price page does not need (the request is a Playwright one)."""
    return request.resource_type in {"image", "font", "media"}


class LazyBrowserProvider:
    """scrapy-playwright's default browser provider, started on first use.

    scrapy-playwright starts its provider (Playwright's node driver) when the engine starts,
    for every crawl; Chromium itself is launched on the first rendered request. Deferring the
    provider's start too means a crawl without rendered pages starts no extra process at all.
    """

    def __init__(self, config) -> None:
        import asyncio

        from scrapy_playwright.provider import PlaywrightBrowserProvider

        self._inner = PlaywrightBrowserProvider(config)
        self._lock = asyncio.Lock()
        self.started = False

    async def start(self) -> None:  # called at engine start: do nothing yet
        return None

    async def _ensure_started(self) -> None:
        async with self._lock:
            if not self.started:
                await self._inner.start()
                self.started = True

    async def launch_browser(self):
        await self._ensure_started()
        return await self._inner.launch_browser()

    async def launch_persistent_context(self, context_kwargs: dict):
        await self._ensure_started()
        return await self._inner.launch_persistent_context(context_kwargs)

    async def close(self) -> None:
        if self.started:
            await self._inner.close()
