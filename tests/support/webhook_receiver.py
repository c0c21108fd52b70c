"""A webhook receiver on loopback: records each POST the approvals webhook sends
(gateway/notify.py), answers with a chosen status after a chosen delay."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["SECRET", "Receiver"]

# The HMAC key the tests give the webhook (through the environment the config names).
SECRET = "webhook-test-secret-0123456789"


class Receiver:
    """A webhook receiver on 127.0.0.1: records each POST, answers ``status`` after ``delay_s``."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.posts: list[dict[str, Any]] = []
        self.delay_s = 0.0
        self.status = 204
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                receiver.posts.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                )
                if receiver.delay_s:
                    receiver.release.wait(receiver.delay_s)
                try:
                    self.send_response(receiver.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the notifier gave up and closed the connection

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/hook?token=query-secret"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)
