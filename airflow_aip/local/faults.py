"""Fault injection for the local training service: the errors Google's APIs and networks produce.

Retraining pipelines run unattended, and Google answers 429 and 503, and connections drop. To
prove that no job is lost or created twice when that happens, ``aip-local serve --fault-rate
0.2`` makes a share of API calls fail, and ``--fault-admin`` lets a test aim faults at one method
(``POST /_faults``), for a number of calls or for a time (``for_seconds``: an outage). Every
fault comes either **before** the request reaches the service, or **after** the service applied
it (the job exists) while the client gets an error or no answer: the client cannot know which,
which is the point.

Kinds: ``429``, ``500``, ``503`` (Google-shaped error bodies), ``"drop"`` (the connection closes
without a byte of answer), ``"reset"`` (TCP reset), ``"delay"`` (the answer waits ``seconds``;
for killing a client between a create and its answer). ``GET /_stats`` counts requests, the
service's own answers (``created`` = creates it applied) and the faults injected.

The same middleware, with the same plan, wraps the proxy ``aip-local serve`` then puts in front
of fake-gcs-server (:mod:`airflow_aip.local.storage.gcs_proxy`): Cloud Storage calls (``storage.*``
methods) fail the same ways, and ``/_faults``/``/_stats`` on the ml port cover them too.

Nothing here is on unless ``aip-local serve`` was asked for it: without fault flags the
middleware is not installed at all (nor the proxy).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_aip.exceptions import ValidationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WHEN = ("before", "after")
ERROR_KINDS: tuple[int | str, ...] = (429, 500, 503)
CONNECTION_KINDS: tuple[int | str, ...] = ("drop", "reset")
KINDS = (*ERROR_KINDS, *CONNECTION_KINDS, "delay")
# What --fault-rate draws from: every way a real call fails (a delay is not a failure).
RANDOM_KINDS = (*ERROR_KINDS, *CONNECTION_KINDS)
ANY_METHOD = "*"
# The creates of every face: ``created`` in the stats counts the jobs applied, whichever API.
CREATE_METHODS = ("jobs.create", "customJobs.create", "hyperparameterTuningJobs.create")
_ROUTES = (
    ("POST", re.compile(r"/v1/projects/[^/]+/jobs"), "jobs.create"),
    ("GET", re.compile(r"/v1/projects/[^/]+/jobs"), "jobs.list"),
    ("GET", re.compile(r"/v1/projects/[^/]+/jobs/[^/:]+"), "jobs.get"),
    ("POST", re.compile(r"/v1/projects/[^/]+/jobs/[^/:]+:cancel"), "jobs.cancel"),
    ("POST", re.compile(r"/v2/entries:list"), "entries.list"),
    # aiplatform v1 (Vertex AI): the discovery document's method names, shortened as ml v1's are.
    *(
        route
        for kind in ("customJobs", "hyperparameterTuningJobs")
        for route in (
            ("POST", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}"), f"{kind}.create"),
            ("GET", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}"), f"{kind}.list"),
            ("GET", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+"), f"{kind}.get"),
            (
                "POST",
                re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+:cancel"),
                f"{kind}.cancel",
            ),
            ("DELETE", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+"), f"{kind}.delete"),
        )
    ),
    # Cloud Storage JSON API, as the proxy in front of fake-gcs-server sees it (airflow_aip.local.
    # gcs_proxy). Paths are percent-decoded, so an object name may hold slashes: first match wins.
    # Uploads (multipart, resumable initiation, resumable data) are all objects.insert; media
    # downloads (objects.get with alt=media) are named apart, so a test can aim at either.
    ("POST", re.compile(r"/upload/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("PUT", re.compile(r"/upload/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/rewriteTo/b/[^/]+/o/.+"), "storage.objects.rewrite"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/copyTo/b/[^/]+/o/.+"), "storage.objects.copy"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/compose"), "storage.objects.compose"),
    ("GET", re.compile(r"/download/storage/v1/b/[^/]+/o/.+"), "storage.objects.download"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.get"),
    ("PATCH", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.patch"),
    ("DELETE", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.delete"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+/o"), "storage.objects.list"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+"), "storage.buckets.get"),
    ("DELETE", re.compile(r"/storage/v1/b/[^/]+"), "storage.buckets.delete"),
    ("GET", re.compile(r"/storage/v1/b"), "storage.buckets.list"),
    ("POST", re.compile(r"/storage/v1/b"), "storage.buckets.insert"),
)
METHODS = tuple(dict.fromkeys(name for _, _, name in _ROUTES))
_MEDIA = re.compile(r"(^|&)alt=media(&|$)")
_GOOGLE_STATUS = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def api_method(verb: str, path: str, query: str = "") -> str | None:
    """The API method a request calls (``jobs.create``...), None for anything else (health checks)."""
    for route_verb, pattern, name in _ROUTES:
        if verb == route_verb and pattern.fullmatch(path):
            if name == "storage.objects.get" and _MEDIA.search(query):
                return "storage.objects.download"
            return name
    return None


@dataclass(frozen=True)
class Fault:
    """What happens to one request."""

    kind: int | str
    when: str
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.when}:{self.kind}"


@dataclass
class FaultRule:
    """A targeted fault: the next ``count`` calls of ``method`` get ``kind``, ``when``.

    ``skip`` lets that many calls of ``method`` through first (a resumable upload's second chunk).
    ``for_seconds`` makes it an outage instead: every call of ``method`` gets the fault for that
    many seconds from when the rule was added, however many calls come (no ``count``); then the
    rule is gone. An outage is a time, not a number of calls: a waiter backing off makes fewer.
    """

    method: str
    when: str
    kind: int | str
    count: int = 1
    seconds: float = 0.0
    skip: int = 0
    for_seconds: float = 0.0
    ends_at: float | None = field(default=None, repr=False)  # monotonic; set when added

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["ends_at"]
        return data

    def expired(self, now: float) -> bool:
        return self.ends_at is not None and now >= self.ends_at


def parse_rule(data: Any) -> FaultRule:
    """A rule from its JSON form; ValidationError naming the field otherwise."""
    if not isinstance(data, Mapping):
        raise ValidationError("rule", "must be a JSON object")
    unknown = set(data) - {"method", "when", "kind", "count", "seconds", "skip", "for_seconds"}
    if unknown:
        raise ValidationError(f"rule.{sorted(unknown)[0]}", "unknown field")
    method = data.get("method", ANY_METHOD)
    if method != ANY_METHOD and method not in METHODS:
        raise ValidationError("rule.method", f"must be '*' or one of {', '.join(METHODS)}; got {method!r}")
    when = data.get("when", "before")
    if when not in WHEN:
        raise ValidationError("rule.when", f"must be 'before' or 'after'; got {when!r}")
    kind = _kind(data)
    count = _whole(data, "count", 1, "a positive integer")
    seconds = _seconds(data, "seconds")
    if kind == "delay" and not seconds:
        raise ValidationError("rule.seconds", "a delay needs a positive number of seconds")
    skip = _whole(data, "skip", 0, "a non-negative integer")
    for_seconds = _seconds(data, "for_seconds")
    if for_seconds and "count" in data:
        raise ValidationError("rule.count", "a rule with for_seconds has no count: it lasts that long")
    return FaultRule(method, when, kind, count, seconds, skip, for_seconds)


def _kind(data: Mapping[str, Any]) -> Any:
    kind = data.get("kind")
    if isinstance(kind, str) and kind.isdigit():
        kind = int(kind)
    if kind not in KINDS or isinstance(kind, bool):
        raise ValidationError("rule.kind", f"must be one of {', '.join(map(str, KINDS))}; got {kind!r}")
    return kind


def _whole(data: Mapping[str, Any], name: str, default: int, rule: str) -> int:
    """A whole number at least ``default`` (1 for count, 0 for skip)."""
    value = data.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < default:
        raise ValidationError(f"rule.{name}", f"must be {rule}; got {value!r}")
    return value


def _seconds(data: Mapping[str, Any], name: str) -> float:
    value = data.get(name, 0.0)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 3600:
        raise ValidationError(f"rule.{name}", f"must be a number of seconds in [0, 3600]; got {value!r}")
    return float(value)


class FaultPlan:
    """Decides, per request, whether and how it fails; counts what happened.

    Targeted rules are consumed first, in the order they were added; otherwise a fault is drawn
    with probability ``rate`` (``seed`` makes the draws repeatable for one request order).
    """

    def __init__(
        self, rate: float = 0.0, seed: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValidationError("fault_rate", f"must be within [0, 1]; got {rate}")
        self.rate = rate
        self.seed = seed
        self._random = random.Random(seed)
        self._clock = clock
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._requests: Counter[str] = Counter()
        self._answers: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._faults: defaultdict[str, Counter[str]] = defaultdict(Counter)

    def add(self, rules: Iterable[FaultRule]) -> None:
        with self._lock:
            now = self._clock()
            for rule in rules:
                if rule.for_seconds:
                    rule.ends_at = now + rule.for_seconds
                self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [rule.to_json() for rule in self._live()]

    def _live(self) -> list[FaultRule]:
        """The rules, timed rules that ended dropped (called with the lock held)."""
        now = self._clock()
        self._rules[:] = [rule for rule in self._rules if not rule.expired(now)]
        return self._rules

    def decide(self, method: str) -> Fault | None:
        """Count the request and say what happens to it (None: nothing)."""
        with self._lock:
            self._requests[method] += 1
            fault = self._targeted(method) or self._drawn()
            if fault is not None:
                self._faults[method][fault.label] += 1
            return fault

    def _targeted(self, method: str) -> Fault | None:
        for rule in self._live():
            if rule.method in (ANY_METHOD, method):
                if rule.skip:
                    rule.skip -= 1
                    return None
                if rule.for_seconds:
                    return Fault(rule.kind, rule.when, rule.seconds)
                rule.count -= 1
                if rule.count == 0:
                    self._rules.remove(rule)
                return Fault(rule.kind, rule.when, rule.seconds)
        return None

    def _drawn(self) -> Fault | None:
        if self.rate <= 0 or self._random.random() >= self.rate:
            return None
        return Fault(self._random.choice(RANDOM_KINDS), self._random.choice(WHEN))

    def record_answer(self, method: str, status: int) -> None:
        """The status the service itself answered (before any fault replaced the answer)."""
        with self._lock:
            self._answers[method][str(status)] += 1

    def stats(self) -> dict[str, Any]:
        """Counters since start; ``created`` is the number of creates the service applied (both APIs)."""
        with self._lock:
            created = sum(
                n
                for method in CREATE_METHODS
                for status, n in self._answers[method].items()
                if status.startswith("2")
            )
            return {
                "fault_rate": self.rate,
                "fault_seed": self.seed,
                "created": created,
                "requests": dict(self._requests),
                "answers": {method: dict(counts) for method, counts in self._answers.items() if counts},
                "faults": {method: dict(counts) for method, counts in self._faults.items() if counts},
                "faults_injected": sum(sum(counts.values()) for counts in self._faults.values()),
                "rules": [rule.to_json() for rule in self._live()],
            }


class FaultInjection:
    """ASGI middleware wrapping the whole service app (outermost, so it owns the connection).

    ``admin`` enables ``POST``/``DELETE /_faults`` (targeted faults); ``GET /_stats`` and
    ``GET /_faults`` are read-only and always served while the middleware is installed.
    """

    def __init__(self, app: ASGIApp, plan: FaultPlan, *, admin: bool = False) -> None:
        self.app = app
        self.plan = plan
        self.admin = admin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verb, path = scope["method"], scope["path"]
        if path in ("/_faults", "/_stats"):
            await self._admin(verb, path, receive, send)
            return
        method = api_method(verb, path, scope.get("query_string", b"").decode("latin-1"))
        if method is None:
            await self.app(scope, receive, send)
            return
        fault = self.plan.decide(method)
        if fault is not None and fault.when == "before":
            if fault.kind != "delay":
                await _inject(fault, send)
                return
            await asyncio.sleep(fault.seconds)
            fault = None
        await self._serve(scope, receive, send, method, fault)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, method: str, fault: Fault | None
    ) -> None:
        """The app answers; an ``after`` fault then replaces (or delays) that answer, once applied."""
        held: list[Message] = []

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.plan.record_answer(method, int(message["status"]))
            if fault is None:
                await send(message)
            else:
                held.append(message)

        await self.app(scope, receive, answer)
        if fault is None:
            return
        if fault.kind == "delay":
            if not await _client_left(receive, fault.seconds):
                for message in held:
                    await send(message)
            return
        await _inject(fault, send)

    async def _admin(self, verb: str, path: str, receive: Receive, send: Send) -> None:
        if path == "/_stats" and verb == "GET":
            await _json(send, 200, self.plan.stats())
            return
        if path == "/_faults" and verb == "GET":
            await _json(send, 200, {"rules": self.plan.rules()})
            return
        if path == "/_faults" and verb in ("POST", "DELETE"):
            if not self.admin:
                await _error(send, 403, "fault admin is off: start aip-local serve with --fault-admin")
                return
            if verb == "DELETE":
                self.plan.clear()
            else:
                try:
                    body = json.loads(await _read_body(receive) or b"{}")
                    listed = body.get("rules", [body]) if isinstance(body, dict) else body
                    if not isinstance(listed, list):
                        raise ValidationError("rules", "must be a list of rules")
                    rules = [parse_rule(item) for item in listed]
                except ValueError as exc:  # ValidationError is a ValueError too
                    await _error(send, 400, str(exc))
                    return
                self.plan.add(rules)
            await _json(send, 200, {"rules": self.plan.rules()})
            return
        await _error(send, 405, f"{verb} {path} is not supported")


async def _client_left(receive: Receive, seconds: float) -> bool:
    """Hold for ``seconds``, or less if the client goes away (a killed client frees the server)."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    try:
        await asyncio.wait_for(disconnected(), seconds)
    except TimeoutError:
        return False
    return True


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str) -> None:
    error = {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "FAILED_PRECONDITION")}
    await _json(send, status, {"error": error})


class ConnectionDropped(Exception):
    """Raised where the server gives no way to close the connection (in-process test clients)."""


async def _inject(fault: Fault, send: Send) -> None:
    if isinstance(fault.kind, int):
        message = f"Injected fault ({fault.label}): aip-local answers {fault.kind}."
        await _error(send, fault.kind, message)
        return
    # ASGI has no message for "close without answering"; uvicorn's send is a bound method of its
    # request cycle, which holds the connection's transport. Close it (FIN) or reset it (RST).
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise ConnectionDropped(f"injected fault {fault.label}")
    if fault.kind == "reset":
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    else:
        transport.close()
    # Let the server notice the connection is gone, so it does not try to answer on it.
    for _ in range(3):
        await asyncio.sleep(0)
