"""A client's HTTP/1.1 requests, passed on whole, with each head made one a strict server takes.

TensorFlow's ``gs://`` starts every upload with an empty POST carrying both
``Content-Length: 0`` and ``Transfer-Encoding: identity`` (``curl_http_request.cc``,
``SetPostEmptyBody``). Google's front end takes it; RFC 9112 has no ``identity`` coding, and
uvicorn's parsers (h11, llhttp) answer 400. So the front's connection is relayed through
:class:`RequestStream`, which finds each request's head and body as the server would (by
``Content-Length`` or chunked framing), drops an ``identity`` transfer coding from the head, and
passes every other byte as it came.
"""

from __future__ import annotations

from collections.abc import Callable

_MAX_HEAD = 1 << 16


class FramingError(ValueError):
    """The bytes are not HTTP/1.1 requests (a head too long, a chunk size that is not hex)."""


def _fixed_head(head: bytes) -> tuple[bytes, bool, int]:
    """The head without ``Transfer-Encoding: identity``; whether the body is chunked; its length."""
    lines = head.split(b"\r\n")
    kept = [lines[0]]
    chunked, length = False, 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key, text = name.strip().lower(), value.strip().lower()
        if key == b"transfer-encoding":
            codings = [c.strip() for c in text.split(b",") if c.strip() and c.strip() != b"identity"]
            if not codings:
                continue
            chunked = codings[-1] == b"chunked"
        elif key == b"content-length" and text.isdigit():
            length = int(text)
        kept.append(line)
    return b"\r\n".join(kept), chunked, 0 if chunked else length


class RequestStream:
    """Feeds on the client's bytes as they arrive, and returns what to send to the server;
    ``on_head`` hears of each request's head as it passes (a passed host's requests are logged)."""

    def __init__(self, on_head: Callable[[bytes], None] | None = None) -> None:
        self._on_head = on_head
        self._buffer = b""
        self._state = "head"
        self._left = 0

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out: list[bytes] = []
        while self._step(out):
            pass
        return b"".join(out)

    def _step(self, out: list[bytes]) -> bool:
        """One piece of framing moved to ``out``; False when more bytes are needed."""
        if self._state in ("body", "chunk-data"):
            piece = self._buffer[: self._left]
            self._buffer = self._buffer[len(piece) :]
            self._left -= len(piece)
            out.append(piece)
            if self._left:
                return False
            self._state = "head" if self._state == "body" else "chunk-size"
            return True
        mark = b"\r\n\r\n" if self._state == "head" else b"\r\n"
        end = self._buffer.find(mark)
        if end < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise FramingError(f"no end of {self._state} in {_MAX_HEAD} bytes")
            return False
        piece, self._buffer = self._buffer[: end + len(mark)], self._buffer[end + len(mark) :]
        if self._state == "head":
            head, chunked, length = _fixed_head(piece[: -len(mark)])
            if self._on_head is not None:
                self._on_head(head)
            out.append(head + mark)
            self._state, self._left = ("chunk-size", 0) if chunked else ("body", length)
        elif self._state == "chunk-size":
            out.append(piece)
            size_text = piece.split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError as exc:
                raise FramingError(f"chunk size {size_text!r} is not hex") from exc
            self._state, self._left = ("trailers", 0) if size == 0 else ("chunk-data", size + 2)
        else:  # trailers, ended by an empty line
            out.append(piece)
            if piece == b"\r\n":
                self._state = "head"
        return True
