"""Raw ASGI, as the fault middleware and its admin endpoint speak it: types, a body, JSON answers.

Raw ASGI rather than a framework's middleware because a fault must own the connection: answer
nothing, reset it, or hold an answer the app already gave.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_GOOGLE_STATUS = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


async def read_body(receive: Receive) -> bytes:
    """The whole request body, however many messages it came in."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, status: int, message: str) -> None:
    """An error in Google's shape (``{"error": {code, message, status}}``), which clients parse."""
    error = {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "FAILED_PRECONDITION")}
    await send_json(send, status, {"error": error})
