"""The curation page (`foundry curate`): a local web server over the lake, one page and a
small JSON API (`data.lake.curation` does the work).

    GET  /                the page (data/review/curation_page.html, in the report page's style)
    GET  /api/queue       a page of the queue: ?kind=&band=&agreement=&hackable=&state=
                          &offset=&limit=
    GET  /api/task/<id>   one task's full record
    POST /api/decisions   {"task_id", "decision", "reason", "note", "edits"}: a decision

It listens on the loopback interface by default, and answers only requests addressed to it
by that name (a page elsewhere cannot reach it through DNS rebinding) and decisions sent as
JSON (which another site's form cannot send without the CORS preflight it never answers).
"""

from __future__ import annotations

import html
import json
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from data.html_page import STYLE
from data.lake import (
    PAGE_SIZE,
    REJECTION_REASONS,
    DecisionError,
    Lake,
    QueueFilter,
    decide,
    queue,
    task_record,
)

PAGE_TEMPLATE = Path(__file__).with_name("curation_page.html")
MAX_BODY = 1_000_000  # bytes of a decision's JSON


def curation_page(lake: Lake, reviewer: str) -> str:
    """The page, with the reviewer, the lake and the rejection reasons filled in."""
    reasons = "".join(
        f'<option value="{html.escape(key)}">{html.escape(key)}: {html.escape(text)}</option>'
        for key, text in REJECTION_REASONS.items()
    )
    return (
        PAGE_TEMPLATE.read_text()
        .replace("{{STYLE}}", STYLE)
        .replace("{{REVIEWER}}", html.escape(reviewer))
        .replace("{{LAKE}}", html.escape(str(lake.root)))
        .replace("{{REASONS}}", reasons)
    )


class CurationServer(ThreadingHTTPServer):
    """The server: `lake` read and appended to, decisions recorded as `reviewer`."""

    daemon_threads = True

    def __init__(self, lake: Lake, reviewer: str, host: str = "127.0.0.1", port: int = 0):
        super().__init__((host, port), _Handler)
        self.lake = lake
        self.reviewer = reviewer
        self.decisions = threading.Lock()  # one decision written at a time

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A page that went away mid-request (a closed tab) is no error worth a trace."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: CurationServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass  # a request per key press: the terminal stays readable

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self._addressed_to_us():
            return
        url = urlsplit(self.path)
        if url.path == "/":
            page = curation_page(self.server.lake, self.server.reviewer)
            self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")
        elif url.path == "/api/queue":
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            where = QueueFilter(**{k: query.get(k, "") for k in QueueFilter.__dataclass_fields__})
            offset = _number(query.get("offset"), 0)
            limit = min(_number(query.get("limit"), PAGE_SIZE), 500)
            self._json(HTTPStatus.OK, queue(self.server.lake, where, offset, limit))
        elif url.path.startswith("/api/task/"):
            found = task_record(self.server.lake, unquote(url.path.removeprefix("/api/task/")))
            if found is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no such task"})
            else:
                self._json(HTTPStatus.OK, found)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"nothing at {url.path}"})

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if not self._addressed_to_us():
            return
        if urlsplit(self.path).path != "/api/decisions":
            self._json(HTTPStatus.NOT_FOUND, {"error": "decisions go to /api/decisions"})
            return
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send JSON"})
            return
        length = _number(self.headers.get("Content-Length"), 0)
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "a decision is 1 byte to 1 MB of JSON"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            with self.server.decisions:
                made = decide(
                    self.server.lake,
                    str(body["task_id"]),
                    str(body["decision"]),
                    self.server.reviewer,
                    reason=str(body.get("reason", "")),
                    note=str(body.get("note", "")),
                    edits=body.get("edits") or {},
                )
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"malformed decision: {exc}"})
            return
        except DecisionError as exc:
            self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})
            return
        self._json(HTTPStatus.OK, made.to_row())

    def _addressed_to_us(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        if host in ("127.0.0.1", "localhost", "::1", self.server.server_address[0]):
            return True
        self._json(HTTPStatus.MISDIRECTED_REQUEST, {"error": f"not served as {host!r}"})
        return False

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        body = json.dumps(payload, default=str).encode()
        self._send(status, body, "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _number(text: str | None, default: int) -> int:
    try:
        return max(0, int(text)) if text is not None else default
    except ValueError:
        return default
