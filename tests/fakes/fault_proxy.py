"""A forwarding proxy on loopback that injects transient faults in front of a real server.

Every request (`GET` or `POST`, any path) is forwarded to `upstream` and its answer passed back
unchanged, except that a share `fault_rate` of them, drawn with a seeded RNG, is answered
instead by a transient fault: a 429 with `Retry-After: 0`, a 503, or a dropped connection.
`served` counts what was done.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TRANSIENT_FAULTS = ("429", "503", "reset")


class FaultProxy:
    """Use as a context manager; `base_url` is the proxy's `http://127.0.0.1:PORT/v1`."""

    def __init__(self, upstream: str, fault_rate: float, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.fault_rate = fault_rate
        self.served: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.proxy = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def draw(self) -> str:
        """The fault for the next request, or "forwarded"."""
        with self._lock:
            fault = "forwarded"
            if self._rng.random() < self.fault_rate:
                fault = self._rng.choice(TRANSIENT_FAULTS)
            self.served[fault] += 1
            return fault


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        self._handle(None)

    def do_POST(self) -> None:
        self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _handle(self, body: bytes | None) -> None:
        proxy: FaultProxy = self.server.proxy  # type: ignore[attr-defined]
        fault = proxy.draw()
        if fault == "reset":
            self.close_connection = True
            with contextlib.suppress(OSError):
                linger = struct.pack("ii", 1, 0)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.connection.close()
            return
        if fault in ("429", "503"):
            error = b'{"error": {"message": "injected fault", "type": "server_error"}}'
            self._send(int(fault), error, "application/json", {"Retry-After": "0"})
            return
        request = urllib.request.Request(
            proxy.upstream + self.path,
            data=body,
            method=self.command,
            headers={"Content-Type": self.headers.get("Content-Type", "application/json")},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                status, data, kind = answer.status, answer.read(), answer.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            status, data, kind = exc.code, exc.read(), exc.headers.get_content_type()
        self._send(status, data, kind, {})

    def _send(self, status: int, data: bytes, kind: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
