"""The chat client against a real local HTTP server speaking the OpenAI chat API."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.llm import LLMError, LLMProvider, OpenAIChatProvider, make_llm_provider
from tests.openai_server import openai_server

HELLO = [{"role": "user", "content": "Say hello"}]


def completion(text: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


def scripted(*replies: tuple[int, Any], delay: float = 0.0):  # type: ignore[no-untyped-def]
    """Answer each request with the next reply (the last one repeats)."""
    queue = list(replies)

    def handle(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        time.sleep(delay)
        if path != "/v1/chat/completions":
            return 404, {"error": "not found"}
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handle


def test_scripted_answer_with_model_key_and_options() -> None:
    with openai_server(scripted((200, completion("hello")))) as (url, seen):
        provider = OpenAIChatProvider(url, "tiny", api_key="sk-test")
        assert isinstance(provider, LLMProvider)
        assert provider.chat(HELLO, temperature=0, max_tokens=5) == "hello"
    request = seen[0]
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["body"] == {"model": "tiny", "messages": HELLO, "temperature": 0,
                               "max_tokens": 5}  # fmt: skip


def test_r6_server_errors_are_retried_with_backoff_then_answered() -> None:
    handler = scripted((500, "boom"), (503, "busy"), (200, completion("ok")))
    with openai_server(handler) as (url, seen):
        provider = OpenAIChatProvider(url, "tiny", max_retries=2, backoff=0.01)
        assert provider.chat(HELLO) == "ok"
    assert len(seen) == 3


def test_r6_persistent_failure_is_an_llm_error_after_bounded_retries() -> None:
    with openai_server(scripted((500, "boom"))) as (url, seen):
        provider = OpenAIChatProvider(url, "tiny", max_retries=2, backoff=0.0)
        with pytest.raises(LLMError, match="3 attempts within 60 s: HTTP 500"):
            provider.chat(HELLO)
    assert len(seen) == 3


def test_r6_a_slow_server_times_out_visibly_within_the_timeout_retries_included() -> None:
    with openai_server(scripted((200, completion("late")), delay=0.6)) as (url, seen):
        provider = OpenAIChatProvider(url, "tiny", timeout=0.3, max_retries=3, backoff=0.0)
        start = time.perf_counter()
        with pytest.raises(LLMError, match=r"within 0\.3 s: ReadTimeout"):
            provider.chat(HELLO)
        assert time.perf_counter() - start < 0.5  # the timeout bounds the call, not each try
    assert len(seen) == 1


def test_r6_retries_stop_when_the_backoff_would_pass_the_timeout() -> None:
    with openai_server(scripted((503, "busy"))) as (url, seen):
        provider = OpenAIChatProvider(url, "tiny", timeout=0.5, max_retries=5, backoff=0.2)
        start = time.perf_counter()
        with pytest.raises(LLMError, match="HTTP 503"):
            provider.chat(HELLO)
        assert time.perf_counter() - start < 0.6
    assert len(seen) == 2  # tries at 0 s and 0.2 s; the next would start at 0.6 s


@pytest.mark.parametrize(
    "reply",
    [(200, "not json at all"), (200, {"choices": []}), (200, completion(None)),
     (200, {"id": "x"})],
)  # fmt: skip
def test_r6_garbage_is_an_llm_error_and_never_retried(reply: tuple[int, Any]) -> None:
    with (
        openai_server(scripted(reply)) as (url, seen),
        pytest.raises(LLMError, match=r"completion|JSON"),
    ):
        OpenAIChatProvider(url, "tiny", backoff=0.0).chat(HELLO)
    assert len(seen) == 1


def test_a_refused_request_is_not_retried() -> None:
    with (
        openai_server(scripted((400, {"error": "bad model"}))) as (url, seen),
        pytest.raises(LLMError, match="HTTP 400"),
    ):
        OpenAIChatProvider(url, "tiny", backoff=0.0).chat(HELLO)
    assert len(seen) == 1


def test_unreachable_server_is_an_llm_error() -> None:
    provider = OpenAIChatProvider("http://127.0.0.1:9/v1", "tiny", max_retries=0, timeout=1)
    with pytest.raises(LLMError, match="1 attempts"):
        provider.chat(HELLO)


def test_r6_bad_messages_and_settings_are_clear_errors() -> None:
    provider = OpenAIChatProvider("http://127.0.0.1:9/v1", "tiny")
    for bad in ([], "hello", [{"role": "boss", "content": "x"}], [{"role": "user"}]):
        with pytest.raises(InvalidArgumentError):
            provider.chat(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="http"):
        OpenAIChatProvider("ftp://x", "tiny")
    with pytest.raises(InvalidArgumentError, match="model"):
        OpenAIChatProvider("http://x/v1", "")


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_llm_provider() is None  # nothing configured: callers run without a model
    monkeypatch.setenv("RAGSPINE_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("RAGSPINE_LLM_MODEL", "qwen")
    monkeypatch.setenv("RAGSPINE_LLM_API_KEY", "sk-env")
    monkeypatch.setenv("RAGSPINE_LLM_TIMEOUT", "5")
    provider = make_llm_provider()
    assert provider == OpenAIChatProvider("http://127.0.0.1:8000/v1", "qwen", "sk-env", 5.0)
    assert make_llm_provider(model="other").model == "other"  # type: ignore[union-attr]
    monkeypatch.setenv("RAGSPINE_LLM_TIMEOUT", "soon")
    with pytest.raises(InvalidArgumentError, match="TIMEOUT"):
        make_llm_provider()
