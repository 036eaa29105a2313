"""The HTTP rules every Google API hook shares (see :class:`~airflow_aip.hooks.google_api.GoogleApiHook`).

One place for: which errors are retried (429, 5xx, connection errors) and how (exponential
backoff with jitter, via tenacity); how an error answer becomes a typed error; how an endpoint
override is read; and the per-event-loop resources every trigger in a triggerer shares (a pool
of httpx clients, a cap on in-flight requests, one set of credentials per connection and
identity, so 1,000 triggers do not refresh 1,000 tokens).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from airflow_aip.exceptions import (
    ApiError,
    JobAlreadyExistsError,
    JobNotFoundError,
    PermissionRefusedError,
    ValidationError,
)
from airflow_aip.hooks.base import ConnectionSettings, env_flag
from airflow_aip.jobs.permissions import permission_advice

T = TypeVar("T")

if TYPE_CHECKING:
    import ssl

    import httpx

RETRY_ATTEMPTS = 6
RETRY_INITIAL_WAIT = 1.0
RETRY_MAX_WAIT = 60.0
REQUEST_TIMEOUT = 60.0
# Each event loop keeps a pool of httpx clients, each holding ONE keep-alive connection, lent
# to one request at a time. Not one client with many connections: httpcore's pool scans every
# queued request against every connection, which costs quadratic CPU with 1,000 triggers.
MAX_CONCURRENT_REQUESTS = 16


@dataclass
class _ClientPool:
    free: list[httpx.AsyncClient] = field(default_factory=list)
    created: int = 0
    tls: ssl.SSLContext | None = None  # loaded once, in a thread: reading CA files blocks
    returned: asyncio.Condition = field(default_factory=asyncio.Condition)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _ClientPool] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def borrow_client(timeout: float) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the running loop's pool, for one request; at most MAX_CONCURRENT_REQUESTS lent."""
    import httpx

    pool = _POOLS.get(asyncio.get_running_loop())
    if pool is None:
        pool = _POOLS[asyncio.get_running_loop()] = _ClientPool()
    async with pool.returned:
        while not pool.free and pool.created >= MAX_CONCURRENT_REQUESTS:
            await pool.returned.wait()
        if pool.free:
            client = pool.free.pop()
        else:
            pool.created += 1
            if pool.tls is None:
                pool.tls = await asyncio.to_thread(httpx.create_ssl_context)
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            client = httpx.AsyncClient(timeout=timeout, limits=limits, verify=pool.tls)
    try:
        yield client
    finally:
        async with pool.returned:
            pool.free.append(client)
            pool.returned.notify()


def api_error(status: int, message: str, method: str, content: bytes | str = b"") -> ApiError:
    """The typed error for an HTTP error answer (``content``: its body, read for a permission refusal)."""
    if status in (400, 403):
        error = google_error(content)
        advice = permission_advice(error) if error is not None else None
        if advice is not None:
            return PermissionRefusedError(status, message, method=method, advice=advice)
    kinds: dict[int, type[ApiError]] = {404: JobNotFoundError, 409: JobAlreadyExistsError}
    kind = kinds.get(status, ApiError)
    return kind(status, message, method=method)


def google_error(content: bytes | str) -> dict[str, Any] | None:
    """The ``error`` object of a Google error body; None if the body is not one."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    try:
        error = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return error if isinstance(error, dict) else None


def error_message(content: bytes | str, fallback: str) -> str:
    """``error.message`` of a Google error body, else the body itself (short), else ``fallback``."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    try:
        body = json.loads(text)
        message = body["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return text.strip()[:500] or fallback


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: throttling, server errors, and the connection failing under us.

    Not 501 (UNIMPLEMENTED): a method the API does not serve will not be served on a second try.
    """
    if isinstance(exc, ApiError):
        return exc.status in (408, 429) or (exc.status >= 500 and exc.status != 501)
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror | http.client.HTTPException):
        return True  # refused, reset, timed out, name lookup failed: not a missing file or a bad path
    module = type(exc).__module__
    name = type(exc).__name__
    if module.startswith("httpx") and name != "InvalidURL":
        import httpx

        return isinstance(exc, httpx.TransportError)
    if module.startswith("google.auth"):
        return name == "TransportError"
    return False


def retry_policy(attempts: int, max_wait: float, log: Any = None, api: str = "ml v1") -> dict[str, Any]:
    """tenacity arguments shared by :class:`Retrying` and :class:`AsyncRetrying`."""

    def before_sleep(state: RetryCallState) -> None:
        if log is not None and state.outcome is not None and state.next_action is not None:
            log.warning(
                "%s request failed (%s); retry %d of %d in %.1fs",
                api,
                state.outcome.exception(),
                state.attempt_number,
                attempts - 1,
                state.next_action.sleep,
            )

    return {
        "stop": stop_after_attempt(attempts),
        "wait": wait_random_exponential(multiplier=RETRY_INITIAL_WAIT, max=max_wait),
        "retry": retry_if_exception(is_transient),
        "before_sleep": before_sleep,
        "reraise": True,
    }


def resolve_api_endpoint(
    explicit: str | None, settings: ConnectionSettings, *, extra: str, env: str
) -> str | None:
    """As :func:`resolve_endpoint` for any API: argument, then connection ``extra``, then ``env``."""
    root = explicit or settings.extras.get(extra) or env_flag(env)
    if not root:
        return None
    root = str(root).strip()
    if urlsplit(root).scheme not in ("http", "https"):
        raise ValidationError(extra, f"must be an http(s) root URL like http://127.0.0.1:8080/, got {root!r}")
    return root if root.endswith("/") else root + "/"


# -- what every trigger of one process shares --------------------------------------------------

SHARED_AUTH_TTL = 300.0  # seconds a connection's settings are reused before being read again
_SHARED_AUTH: dict[tuple[str, ...], tuple[float, ConnectionSettings, tuple[Any, str | None]]] = {}
_REFRESH_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def shared_auth(key: tuple[str, ...]) -> tuple[ConnectionSettings, tuple[Any, str | None]] | None:
    """Settings and credentials another hook of this process loaded for the same connection."""
    hit = _SHARED_AUTH.get(key)
    if hit is None or time.monotonic() - hit[0] > SHARED_AUTH_TTL:
        return None
    return hit[1], hit[2]


def share_auth(
    key: tuple[str, ...], settings: ConnectionSettings, credentials: tuple[Any, str | None]
) -> None:
    _SHARED_AUTH[key] = (time.monotonic(), settings, credentials)


def clear_shared_auth() -> None:
    """Forget every shared connection (tests; a rotated key is picked up within the TTL anyway)."""
    _SHARED_AUTH.clear()


def refresh_lock(credentials: Any) -> asyncio.Lock:
    """One lock per credentials object and event loop: a single refresh when a shared token expires."""
    locks = _REFRESH_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(id(credentials), asyncio.Lock())


def settled_lookup(lookup: Callable[[], T | None], delays: Iterable[float]) -> T | None:
    """``lookup()`` at once, then after each delay, until it finds something; None if it never does.

    After a create whose answer was lost, the created thing may show up in a list only a moment
    later (lists lag creates). A transient failure of a lookup is one more try lost, not an error.
    """
    for delay in (0.0, *delays):
        time.sleep(delay)
        try:
            found = lookup()
        except Exception as err:
            if not is_transient(err):
                raise
            continue
        if found is not None:
            return found
    return None
