"""A model server process that lists a model and then dies, as a bad llama.cpp build does.

    python -m tests.fakes.dying_server --port PORT --on completion --signal SIGILL
    python -m tests.fakes.dying_server --port PORT --on start --exit-code 1
    python -m tests.fakes.dying_server --port PORT --on never

`--on start`: it dies before it listens (a server that cannot load). `--on completion`: it
answers `GET /v1/models` like llama.cpp's server and dies on the first chat completion, by the
signal given (SIGILL: instructions the CPU cannot run) or with the exit code. It prints a line
first, as a server's log would. `--on never`: it answers every completion with one token, a
server that dies only of what is done to it from outside.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def die(args: argparse.Namespace) -> None:
    print(f"dying as asked ({args.signal or args.exit_code})", flush=True)
    if args.signal:
        signal.signal(getattr(signal, args.signal), signal.SIG_DFL)
        os.kill(os.getpid(), getattr(signal, args.signal))
    os._exit(args.exit_code)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--on", choices=["start", "completion", "never"], required=True)
    parser.add_argument("--signal", help="e.g. SIGILL")
    parser.add_argument("--exit-code", type=int, default=1)
    args = parser.parse_args()
    if args.on == "start":
        die(args)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *rest: object) -> None:
            """Quiet."""

        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": "dying", "object": "model"}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def do_POST(self) -> None:
            if args.on == "completion":
                die(args)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            message = {"role": "assistant", "content": "Hi"}
            body = json.dumps({"choices": [{"index": 0, "message": message}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    print("listening", flush=True)
    HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    sys.exit(main())
