"""One POST with bounded retries inside one time budget, for every model service we call.

Services fail in two ways: transiently (timeouts, dropped connections, 408/429/5xx), which a retry
with backoff can fix, and for good (other 4xx), which it cannot. ``timeout`` bounds the whole call,
retries and backoff included, so a dead service adds at most ``timeout`` to a query (R6).
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ragspine.errors import RagspineError

if TYPE_CHECKING:
    import httpx

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class ServiceError(RagspineError):
    """A model service gave no usable answer; the message says why."""


def pooled_client() -> httpx.Client:
    """One client per model service: connections are reused and TLS is set up once (a new
    client per request costs tens of milliseconds)."""
    import httpx

    return httpx.Client()


def post_json(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    *,
    api_key: str = "",
    timeout: float,
    max_retries: int,
    backoff: float,
) -> Any:
    """The decoded JSON reply of ``POST url``, or :class:`ServiceError`."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout
    failure = "no time left for an attempt"
    attempts = 0
    for attempt in range(max_retries + 1):
        if attempt:
            pause = backoff * 2 ** (attempt - 1)
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        attempts += 1
        try:
            response = client.post(url, json=body, headers=headers, timeout=remaining)
        except httpx.HTTPError as exc:  # timeouts and connection errors: worth a retry
            failure = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code in RETRYABLE_STATUS:
            failure = f"HTTP {response.status_code}: {response.text[:200]}"
            continue
        if response.status_code >= 400:
            raise ServiceError(
                f"{url} refused the request: HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ServiceError(f"{url} answered with no JSON: {response.text[:200]!r}") from exc
    raise ServiceError(f"{url} failed after {attempts} attempts within {timeout:g} s: {failure}")


class RetryingJsonClient:
    """For a client of one model service: a pooled connection and :func:`post_json` with the
    service's ``api_key``, ``timeout``, ``max_retries`` and ``backoff`` (attributes the class
    defines), failures raised as ``error``."""

    api_key: str
    timeout: float
    max_retries: int
    backoff: float

    @cached_property
    def _client(self) -> httpx.Client:
        return pooled_client()

    def _post(self, url: str, body: dict[str, Any], error: type[RagspineError]) -> Any:
        try:
            return post_json(
                self._client,
                url,
                body,
                api_key=self.api_key,
                timeout=self.timeout,
                max_retries=self.max_retries,
                backoff=self.backoff,
            )
        except ServiceError as exc:
            raise error(str(exc)) from exc
