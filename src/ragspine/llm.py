"""The chat model behind query transforms, listwise reranking and summaries.

One protocol, :class:`LLMProvider` (OpenAI-shaped messages in, text out), and one client for any
OpenAI-compatible ``POST {base_url}/chat/completions`` (OpenAI, vLLM, llama.cpp, Ollama, TGI).
Callers treat :class:`LLMError` as "the model is unavailable" and degrade visibly (R6): the
client retries only what a retry can fix (timeouts, connection errors, 429 and 5xx), with
exponential backoff, never retries a malformed or refused request, and ``timeout`` bounds the
whole call, retries included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine.config import llm_settings, parse_seconds
from ragspine.errors import InvalidArgumentError
from ragspine.http_retry import RetryingJsonClient, ServiceError

_JSON_LIST = re.compile(r"\[[^\[\]]*\]")
ROLES = frozenset({"system", "user", "assistant", "tool"})


class LLMError(ServiceError):
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
class OpenAIChatProvider(RetryingJsonClient):
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
        body = {**options, "model": self.model, "messages": check_messages(messages)}
        reply = self._post(self.url, body, LLMError)
        return _content(self.url, reply)


def _content(url: str, reply: Any) -> str:
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"{url} sent no chat completion: {str(reply)[:200]!r}") from exc
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
    return OpenAIChatProvider(
        url,
        model or settings.get("model", ""),
        api_key or settings.get("api_key", ""),
        timeout=parse_seconds(
            timeout if timeout is not None else settings.get("timeout", "60"),
            "RAGSPINE_LLM_TIMEOUT",
        ),
    )


def json_list(answer: str) -> list[Any]:
    """The last JSON list in a chat answer (models wrap answers in prose and code fences)."""
    for candidate in reversed(_JSON_LIST.findall(answer if isinstance(answer, str) else "")):
        try:
            found = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(found, list):
            return found
    raise LLMError(f"the model answered without a JSON list: {str(answer)[:120]!r}")
