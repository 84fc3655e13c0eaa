"""A local HTTP server that speaks the OpenAI API, for tests (127.0.0.1, stopped by the test)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[str, dict[str, Any], dict[str, str]], tuple[int, Any]]


@contextmanager
def openai_server(handle: Handler) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve ``handle(path, body, headers) -> (status, json-or-text)``; yields the base URL and
    the list of requests seen."""
    seen: list[dict[str, Any]] = []

    class RequestHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.append({"path": self.path, "body": body, "headers": headers})
            status, payload = handle(self.path, body, headers)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout under test)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def fake_embeddings(dimension: int = 8, delay: float = 0.0) -> Handler:
    """Deterministic vectors from the text's bytes, returned in reverse order (as servers may)."""

    def handle(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        time.sleep(delay)
        if path != "/v1/embeddings":
            return 404, {"error": "not found"}
        data = []
        for index, text in enumerate(body["input"]):
            raw = text.encode()
            vector = [float(sum(raw[i::dimension]) % 97 + 1) for i in range(dimension)]
            data.append({"object": "embedding", "index": index, "embedding": vector})
        return 200, {"object": "list", "data": list(reversed(data)), "model": body["model"]}

    return handle
