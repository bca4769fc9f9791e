"""Fetching a server's /metrics (and its max_model_len from /v1/models), with one-line errors."""

import time

import httpx

from kvtool.monitor.page import MetricsUnavailable, Page, parse_page
from kvtool.monitor.window import Reading

TIMEOUT_S = 5.0


def metrics_url(url: str) -> str:
    """The /metrics URL for a server's base URL or the /metrics URL itself."""
    url = url.rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/metrics") else url + "/metrics"


def base_url(url: str) -> str:
    return metrics_url(url).removesuffix("/metrics")


class Scraper:
    """One HTTP client for repeated scrapes of one server."""

    def __init__(self, url: str, api_key: str | None = None):
        self.url = metrics_url(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, timeout=TIMEOUT_S)

    def page(self) -> Page:
        try:
            response = self.client.get(self.url)
        except httpx.HTTPError as err:
            raise MetricsUnavailable(
                f"no server answers at {self.url} ({type(err).__name__}).",
                fix="Check the URL and that the server is up.",
            ) from None
        if response.status_code in (401, 403):
            raise MetricsUnavailable(
                f"{self.url} answered HTTP {response.status_code}.", fix="Pass the server's --api-key."
            )
        if response.status_code != 200:
            raise MetricsUnavailable(
                f"{self.url} answered HTTP {response.status_code}.",
                fix="Point at the server's base URL or its /metrics.",
            )
        return parse_page(response.text, self.url)

    def reading(self) -> Reading:
        return Reading(self.page(), time.monotonic())

    def max_model_len(self) -> int | None:
        """The served model's max_model_len from /v1/models (vLLM and kvtool serve list it); None if unknown."""
        try:
            models = self.client.get(base_url(self.url) + "/v1/models").json().get("data", [])
            return int(models[0]["max_model_len"]) if models else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
