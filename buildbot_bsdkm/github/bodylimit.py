"""Refuse oversized request bodies while they arrive, not after they were spooled to disk.

Twisted reads a request's whole body (to a temporary file past 100 kB) before any resource
sees it, so the hook's own size check came after 300 MiB of unsigned data had been stored.
This request class answers 413 as soon as the declared ``Content-Length`` is too big, or as
soon as a chunked body grows past the limit, and drops the connection without reading more.
"""

from __future__ import annotations

import io
from typing import Any

from twisted.python import log
from twisted.web import server


class _Discard(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return len(data)


def limited_request_class(
    max_bytes: int, base: type[server.Request] = server.Request
) -> type[server.Request]:
    class LimitedRequest(base):  # type: ignore[misc, valid-type]
        body_limit = max_bytes

        def gotLength(self, length: int | None) -> None:
            self._body_seen = 0
            self._refused = False
            if length is not None and length > self.body_limit:
                self.content = _Discard()
                self._refuse(f"declared Content-Length {length} exceeds the {self.body_limit}-byte limit")
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._refused:
                return
            self._body_seen += len(data)
            if self._body_seen > self.body_limit:
                self._refuse(f"body exceeds the {self.body_limit}-byte limit")
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            if not self._refused:
                super().requestReceived(command, path, version)

        def _refuse(self, reason: str) -> None:
            self._refused = True
            peer = getattr(self.channel.transport, "getPeer", lambda: "?")()
            log.msg(f"bsdkm github: refused a request from {peer}: {reason}")
            text = f"refused: {reason}\n".encode()
            transport = self.channel.transport
            transport.write(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + b"Content-Length: %d\r\n\r\n" % len(text)
                + text
            )
            transport.loseConnection()

    return LimitedRequest


def install(site: Any, max_bytes: int) -> None:
    """Make ``site`` (Buildbot's www site) refuse bodies over ``max_bytes``; idempotent."""
    current = site.requestFactory
    if getattr(current, "body_limit", None) == max_bytes:
        return
    base = getattr(current, "__bsdkm_base__", current)
    limited = limited_request_class(max_bytes, base)
    limited.__bsdkm_base__ = base  # type: ignore[attr-defined]
    site.requestFactory = limited


def install_for_buildbot(max_bytes: int) -> None:
    """Every Buildbot web site of this process, including one not created yet, refuses big bodies.

    Called when the master reads its configuration, so the limit is in place before the web port
    listens (installing it on the site later left a window in which bodies were read whole).
    """
    from buildbot.www.service import BuildbotSite

    install(BuildbotSite, max_bytes)
