"""A local HTTP server for back-ends that cannot run here (Loki, the Kubernetes API,
slurmrestd error paths). Tests register handlers that answer with recorded real API
shapes; the connector under test talks real HTTP to it through its real client code.

    def test_x(fake_http):
        fake_http.route("GET", "/loki/api/v1/query_range", lambda req: (200, {...}))
        client = LokiClient(url=fake_http.url, ...)

A handler gets a `Request` and returns `(status, body)` or `(status, body, headers)`;
`body` may be a dict/list (sent as JSON), str or bytes. `fake_http.requests` records every
request for assertions. A handler may `time.sleep` to provoke a client timeout.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.body or b"null")


Handler = Callable[[Request], tuple]


@dataclass
class FakeHTTPServer:
    server: ThreadingHTTPServer
    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    prefixes: list[tuple[str, str, Handler]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Exact path match."""
        self.routes[(method.upper(), path)] = handler

    def route_prefix(self, method: str, prefix: str, handler: Handler) -> None:
        """Any path starting with `prefix` (longest prefix wins)."""
        self.prefixes.append((method.upper(), prefix, handler))
        self.prefixes.sort(key=lambda t: -len(t[1]))

    def find(self, method: str, path: str) -> Handler | None:
        if (method, path) in self.routes:
            return self.routes[(method, path)]
        for m, prefix, handler in self.prefixes:
            if m == method and path.startswith(prefix):
                return handler
        return None


def _make_handler(fake: FakeHTTPServer) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            req = Request(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self.rfile.read(length) if length else b"",
            )
            if req.method == "POST" and req.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"
            ):
                for k, v in parse_qs(req.body.decode(), keep_blank_values=True).items():
                    req.query.setdefault(k, []).extend(v)
            fake.requests.append(req)
            handler = fake.find(req.method, req.path)
            if handler is None:
                out: tuple = (404, {"error": f"no fake route for {req.method} {req.path}"})
            else:
                out = handler(req)
            status, body = out[0], out[1]
            headers = dict(out[2]) if len(out) > 2 else {}
            if isinstance(body, (dict, list)):
                data = json.dumps(body).encode()
                headers.setdefault("Content-Type", "application/json")
            elif isinstance(body, str):
                data = body.encode()
                headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            else:
                data = bytes(body)
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    return H


def start_fake_http() -> FakeHTTPServer:
    fake = FakeHTTPServer(server=None)  # type: ignore[arg-type]
    fake.server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(fake))
    fake.server.daemon_threads = True
    threading.Thread(target=fake.server.serve_forever, daemon=True).start()
    return fake
