"""A test's HTTP server on a free loopback port, served from a thread for as long as it is needed."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(handler: Callable[..., Any], *, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve ``handler`` (a request handler class, or a callable making one); yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="loopback-http", daemon=True).start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
