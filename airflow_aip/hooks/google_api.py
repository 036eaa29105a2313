"""One HTTP core for the Google REST APIs we call (Vertex AI, ml v1, Cloud Logging v2): sync and async.

Every API hook is this class plus its paths. It owns, once:

- **where**: the hook argument, then the connection extra, then gcloud's
  ``CLOUDSDK_API_ENDPOINT_OVERRIDES_*`` variable, else Google's endpoint in the credentials'
  universe domain. An emulator endpoint (loopback or plain http) gets no credentials at all:
  a bearer token must never travel over plain http;
- **as whom**: credentials from the connection (:mod:`airflow_aip.hooks.credentials`), and
  each request signed by google-auth itself (``credentials.before_request``), so the quota
  project header, universe domain checks and token refresh behave as in Google's clients. A
  401 refreshes the token and retries once, as google-auth's own transports do;
- **one request path**: httpx for both, sync (a client per hook) and async (the event loop's
  shared pool, see :mod:`airflow_aip.hooks.http_shared`); the same retry policy (tenacity:
  429, 5xx and connection errors, backoff with jitter) and the same typed errors. httpx never
  re-sends a request on its own, so a create is re-sent only by our policy, which knows how to
  recognise its own job afterwards.

The async path never blocks the event loop: the connection is read with ``aget_connection``,
credentials are loaded and refreshed in a thread, and triggers on one connection share them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from tenacity import AsyncRetrying, Retrying

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.base import DEFAULT_CONN_ID, ConnectionSettings, GoogleCloudBaseHook
from airflow_aip.hooks.credentials import anonymous_credentials, auth_request
from airflow_aip.hooks.http_shared import (
    REQUEST_TIMEOUT,
    RETRY_ATTEMPTS,
    RETRY_MAX_WAIT,
    api_error,
    borrow_client,
    error_message,
    refresh_lock,
    resolve_api_endpoint,
    retry_policy,
    share_auth,
    shared_auth,
)
from airflow_aip.uris import is_emulator

if TYPE_CHECKING:
    import httpx

DEFAULT_UNIVERSE = "googleapis.com"


class GoogleApiHook(GoogleCloudBaseHook):
    """Endpoint, credentials and the request path of one Google REST API.

    :param gcp_conn_id: Airflow connection (provider-google extras; missing => ADC).
    :param project_id: overrides the connection's and the credentials' project.
    :param api_endpoint: root URL override, e.g. ``http://127.0.0.1:8080/``.
    :param impersonation_chain: account (or chain) to impersonate; wins over the connection's.
    :param retry_attempts: total tries of a request on transient errors.
    """

    api_label: ClassVar[str] = "Google API"
    default_host: ClassVar[str] = "googleapis.com"  # e.g. "ml": https://ml.googleapis.com/
    endpoint_extra: ClassVar[str] = "api_endpoint"
    endpoint_env: ClassVar[str] = ""

    def __init__(
        self,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        *,
        project_id: str | None = None,
        api_endpoint: str | None = None,
        impersonation_chain: str | Sequence[str] | None = None,
        retry_attempts: int = RETRY_ATTEMPTS,
        retry_max_wait: float = RETRY_MAX_WAIT,
        request_timeout: float = REQUEST_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(gcp_conn_id, impersonation_chain=impersonation_chain, **kwargs)
        self._project_id = project_id
        self._api_endpoint = api_endpoint
        self.retry_attempts = retry_attempts
        self.retry_max_wait = retry_max_wait
        self.request_timeout = request_timeout

    # -- where and as whom -------------------------------------------------------------------

    @cached_property
    def endpoint(self) -> str | None:
        """The root URL override, or None for Google's own endpoint."""
        return resolve_api_endpoint(
            self._api_endpoint, self.settings, extra=self.endpoint_extra, env=self.endpoint_env
        )

    def google_host(self) -> str:
        """The API's host name before the universe domain (``ml``; Vertex AI's is regional)."""
        return self.default_host

    @property
    def root_url(self) -> str:
        """The override, else Google's endpoint in the credentials' universe (googleapis.com)."""
        if self.endpoint:
            return self.endpoint
        universe = getattr(self.credentials_and_project[0], "universe_domain", None) or DEFAULT_UNIVERSE
        return f"https://{self.google_host()}.{universe}/"

    @cached_property
    def is_local(self) -> bool:
        """Talking to an emulator (loopback or plain http): anonymous credentials, no token sent."""
        return self.endpoint is not None and is_emulator(self.endpoint)

    def local_page(self, name: str) -> str | None:
        """The local service's own page of a job (``/console/<resource name>``); None on Google."""
        return f"{self.root_url.rstrip('/')}/console/{name}" if self.is_local and name else None

    @cached_property
    def credentials_and_project(self) -> tuple[Any, str | None]:
        """``(credentials, project)``; anonymous for a local endpoint (no key, no ADC lookup)."""
        if self.is_local:
            return anonymous_credentials(), self.settings.project_id
        return self.load_credentials()

    @property
    def project_id(self) -> str:
        """The project: argument, connection, impersonated account, then credentials."""
        project = self._project_id or self.settings.project_id or self.credentials_and_project[1]
        if not project:
            raise ValidationError(
                "project_id", "is required: pass it to the task or set 'project' on the connection"
            )
        return project

    @cached_property
    def _retry_policy(self) -> dict[str, Any]:
        """tenacity's arguments, the same for both paths (built once: a trigger polls for hours)."""
        return retry_policy(self.retry_attempts, self.retry_max_wait, self.log, self.api_label)

    # -- sync --------------------------------------------------------------------------------

    @cached_property
    def _client(self) -> httpx.Client:
        import httpx

        return httpx.Client(timeout=self.request_timeout)

    def _sync_client(self) -> httpx.Client:
        """The HTTP client (tests replace this at the HTTP boundary)."""
        return self._client

    def _sign(self, verb: str, url: str, *, refresh: bool = False) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.is_local:
            return headers
        credentials = self.credentials_and_project[0]
        if refresh:
            credentials.refresh(auth_request())
        credentials.before_request(auth_request(), verb, url, headers)
        return headers

    def request(
        self,
        method: str,
        verb: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        on_send: Callable[[], None] | None = None,
        retry: bool = True,
    ) -> dict[str, Any]:
        """One API call with the retry policy; an error answer becomes a typed error.

        ``on_send`` is called before each attempt: a create counts its sends with it.
        ``retry=False`` sends once: for a create on an API that cannot recognise a re-send.
        """
        url = self.root_url + path

        def once() -> dict[str, Any]:
            if on_send is not None:
                on_send()
            response = None
            for refresh in (False, True):
                headers = self._sign(verb, url, refresh=refresh)
                response = self._sync_client().request(
                    verb,
                    str(request_url(url, params)),
                    json=body,
                    headers=headers,  # str: any httpx-like client
                )
                if not _needs_refresh(response.status_code, refresh, self.is_local):
                    break
            return _decoded(response, method)

        if not retry:
            return once()
        for attempt in Retrying(**self._retry_policy):
            with attempt:
                return once()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # -- async (triggers) --------------------------------------------------------------------

    def _shared_auth_key(self) -> tuple[str, ...]:
        """What identifies a connection, endpoint and identity whose auth triggers may share."""
        return (self.gcp_conn_id, type(self).__name__, str(self._api_endpoint), *self.impersonation_chain)

    async def aprepare(self) -> None:
        """Read the connection and credentials without blocking the event loop (once per key)."""
        if "settings" in self.__dict__ and "credentials_and_project" in self.__dict__:
            return
        key = self._shared_auth_key()
        shared = shared_auth(key)
        if shared is not None:
            self.__dict__["settings"], self.__dict__["credentials_and_project"] = shared
            return
        if "settings" not in self.__dict__:
            from airflow_aip.compat import AirflowNotFoundException

            try:
                conn = await self.aget_connection(self.gcp_conn_id)
                self.__dict__["settings"] = ConnectionSettings.from_extras(dict(conn.extra_dejson or {}))
            except AirflowNotFoundException:
                self.__dict__["settings"] = ConnectionSettings()
        if "credentials_and_project" not in self.__dict__:
            found = await asyncio.to_thread(lambda: self.credentials_and_project)
            self.__dict__["credentials_and_project"] = found
        share_auth(key, self.__dict__["settings"], self.__dict__["credentials_and_project"])

    def _client_slot(self) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        """Borrow a client of the event loop's pool (tests replace this at the HTTP boundary)."""
        return borrow_client(self.request_timeout)

    async def _asign(self, verb: str, url: str, *, refresh: bool = False) -> dict[str, str]:
        """As :meth:`_sign`; a refresh (network I/O) runs in a thread, once for all who share it."""
        headers: dict[str, str] = {}
        if self.is_local:
            return headers
        credentials = self.credentials_and_project[0]
        if refresh or not credentials.valid:
            rejected = credentials.token if refresh else None
            async with refresh_lock(credentials):  # whoever waited here may find it refreshed
                if not credentials.valid or (refresh and credentials.token == rejected):
                    await asyncio.to_thread(credentials.refresh, auth_request())
        credentials.before_request(auth_request(), verb, url, headers)  # valid now: no I/O
        return headers

    async def arequest(
        self, method: str, verb: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """As :meth:`request`, without blocking the event loop."""
        return _json(await self.arequest_bytes(method, verb, path, body=body, params=params))

    async def arequest_bytes(
        self, method: str, verb: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None
    ) -> bytes:
        """As :meth:`arequest`, the answer's body as it came: a watch list compares it with its last."""
        await self.aprepare()
        url = self.root_url + path
        target = request_url(url, params)

        async def once() -> bytes:
            response = None
            for refresh in (False, True):
                headers = await self._asign(verb, url, refresh=refresh)
                async with self._client_slot() as client:
                    response = await client.request(
                        verb, target, json=body, headers=headers, timeout=self.request_timeout
                    )
                if not _needs_refresh(response.status_code, refresh, self.is_local):
                    break
            return _checked(response, method).content

        async for attempt in AsyncRetrying(**self._retry_policy):
            with attempt:
                return await once()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def pages(
        self, method: str, verb: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> Iterator[dict[str, Any]]:
        """A list method's answers, page after page: the one pager of every list we read.

        The ``pageToken`` goes where the method takes its arguments: the query of a GET, the
        body of a POST (Cloud Logging's ``entries.list``).
        """
        params, body = dict(params or {}), body
        while True:
            page = self.request(method, verb, path, params=params or None, body=body)
            yield page
            token = page.get("nextPageToken")
            if not token:
                return
            params, body = _next_page(verb, params, body, token)

    async def apages(
        self, method: str, verb: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> AsyncIterator[dict[str, Any]]:
        """As :meth:`pages`, without blocking the event loop."""
        params, body = dict(params or {}), body
        while True:
            page = await self.arequest(method, verb, path, params=params or None, body=body)
            yield page
            token = page.get("nextPageToken")
            if not token:
                return
            params, body = _next_page(verb, params, body, token)

    def list_all(self, method: str, path: str, items: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of a GET list method (``items`` is its collection key), all pages."""
        return [
            item for page in self.pages(method, "GET", path, params=params) for item in page.get(items) or []
        ]

    async def alist_all(
        self, method: str, path: str, items: str, params: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """As :meth:`list_all`, without blocking the event loop."""
        found: list[dict[str, Any]] = []
        async for page in self.apages(method, "GET", path, params=params):
            found.extend(page.get(items) or [])
        return found


def _next_page(verb: str, params: dict[str, Any], body: Any, token: str) -> tuple[dict[str, Any], Any]:
    if verb == "POST":
        return params, {**body, "pageToken": token}
    return {**params, "pageToken": token}, body


def request_url(url: str, params: dict[str, Any] | None) -> httpx.URL:
    """The request's URL with its query, parsed once for all the requests that repeat it.

    httpx checks every character of a URL it is given as text: a poll round's 50 list calls,
    each filtered on 100 jobs (~4 KB of query), cost more in that check than in their answers.
    """
    return _parsed_url(url, tuple(sorted((params or {}).items())))


@lru_cache(maxsize=1024)
def _parsed_url(url: str, query: tuple[tuple[str, Any], ...]) -> httpx.URL:
    import httpx

    return httpx.URL(url, params=dict(query)) if query else httpx.URL(url)


def _needs_refresh(status: int, refreshed: bool, local: bool) -> bool:
    """A 401 with a token that was not just refreshed: refresh and send again, once."""
    return status == 401 and not refreshed and not local


def _decoded(response: httpx.Response | None, method: str) -> dict[str, Any]:
    return _json(_checked(response, method).content)


def _checked(response: httpx.Response | None, method: str) -> httpx.Response:
    assert response is not None  # the loop above always sends at least once
    if response.status_code >= 400:
        message = error_message(response.content, response.reason_phrase)
        raise api_error(response.status_code, message, method, response.content)
    return response


def _json(content: bytes) -> dict[str, Any]:
    return dict(json.loads(content) or {}) if content else {}
