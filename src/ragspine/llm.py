"""The chat model behind query transforms, listwise reranking and summaries.

One protocol, :class:`LLMProvider` (OpenAI-shaped messages in, text out), and one client for any
OpenAI-compatible ``POST {base_url}/chat/completions`` (OpenAI, vLLM, llama.cpp, Ollama, TGI).
Callers treat :class:`LLMError` as "the model is unavailable" and degrade visibly (R6): the
client retries only what a retry can fix (timeouts, connection errors, 429 and 5xx), with
exponential backoff, and never retries a malformed or refused request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine.config import llm_settings
from ragspine.errors import InvalidArgumentError, RagspineError

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
ROLES = frozenset({"system", "user", "assistant", "tool"})


class LLMError(RagspineError):
    """The model gave no usable answer: unreachable, an HTTP error after retries, or a reply
    that is not an OpenAI chat completion. The message says which."""


@runtime_checkable
class LLMProvider(Protocol):
    def chat(self, messages: list[dict[str, Any]], **options: Any) -> str: ...


def check_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages (``role`` and string ``content``), or InvalidArgumentError."""
    if isinstance(messages, (str, bytes)) or not messages:
        raise InvalidArgumentError("messages must be a non-empty list of {role, content} dicts")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidArgumentError(f"message {i} is not a mapping: {message!r}")
        if message.get("role") not in ROLES or not isinstance(message.get("content"), str):
            raise InvalidArgumentError(
                f"message {i} needs a role in {sorted(ROLES)} and string content: {message!r}"
            )
        checked.append(dict(message))
    return checked


@dataclass(frozen=True)
class OpenAIChatProvider:
    """``chat`` over any OpenAI-compatible server; ``options`` (temperature, max_tokens,
    response_format, ...) go into the request body as they are."""

    base_url: str
    model: str
    api_key: str = ""
    timeout: float = 60.0
    max_retries: int = 2
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"LLM base URL must be http(s), got {self.base_url!r}")
        if not self.model:
            raise InvalidArgumentError("an LLM model name is required")
        if self.timeout <= 0 or self.max_retries < 0 or self.backoff < 0:
            raise InvalidArgumentError(
                "timeout must be > 0, max_retries and backoff >= 0; got "
                f"{self.timeout}, {self.max_retries}, {self.backoff}"
            )

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> str:
        import httpx

        body = {**options, "model": self.model, "messages": check_messages(messages)}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        failure = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = httpx.post(self.url, json=body, headers=headers, timeout=self.timeout)
            except httpx.HTTPError as exc:  # timeouts and connection errors: worth a retry
                failure = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in RETRYABLE_STATUS:
                failure = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise LLMError(
                    f"{self.url} refused the request: HTTP {response.status_code}: "
                    f"{response.text[:200]}"
                )
            return _content(self.url, response)
        raise LLMError(f"{self.url} failed after {self.max_retries + 1} attempts: {failure}")


def _content(url: str, response: Any) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"{url} sent no chat completion: {response.text[:200]!r}") from exc
    if not isinstance(content, str):
        raise LLMError(f"{url} sent a completion without text content: {content!r}")
    return content


def make_llm_provider(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
) -> OpenAIChatProvider | None:
    """The configured chat model, or None when no base URL is set (keywords win over
    ``RAGSPINE_LLM_*``)."""
    settings = llm_settings()
    url = base_url or settings.get("base_url")
    if not url:
        return None
    raw_timeout = timeout if timeout is not None else settings.get("timeout", "60")
    try:
        seconds = float(raw_timeout)
    except ValueError as exc:
        raise InvalidArgumentError(f"RAGSPINE_LLM_TIMEOUT={raw_timeout!r} is not a number") from exc
    return OpenAIChatProvider(
        url,
        model or settings.get("model", ""),
        api_key or settings.get("api_key", ""),
        timeout=seconds,
    )
