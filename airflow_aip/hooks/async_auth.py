"""Connection and credentials on the async (trigger) path, shared by the ml and logging hooks.

A triggerer runs hundreds of triggers in one event loop: reading the connection or refreshing
a token must never block it, and triggers on the same connection share what the first one
loaded (see :func:`~airflow_aip.hooks.ml_http.shared_auth`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_aip.hooks.base import ConnectionSettings
from airflow_aip.hooks.ml_http import refresh_lock, share_auth, shared_auth


class AsyncAuthMixin:
    """For hooks with ``gcp_conn_id``, ``is_local`` and a cached ``credentials_and_project``."""

    def _shared_auth_key(self) -> tuple[str, str | None]:
        """What identifies the connection and endpoint(s) whose auth may be shared."""
        raise NotImplementedError

    async def aprepare(self) -> None:
        """Read the connection and credentials without blocking the event loop (once per key)."""
        hook: Any = self  # the mixin's host: a GoogleCloudBaseHook with cached properties
        if "settings" in hook.__dict__ and "credentials_and_project" in hook.__dict__:
            return
        key = self._shared_auth_key()
        shared = shared_auth(key)
        if shared is not None:
            hook.__dict__["settings"], hook.__dict__["credentials_and_project"] = shared
            return
        if "settings" not in hook.__dict__:
            from airflow.sdk.exceptions import AirflowNotFoundException

            try:
                conn = await hook.aget_connection(hook.gcp_conn_id)
                settings = ConnectionSettings.from_extras(dict(conn.extra_dejson or {}))
            except AirflowNotFoundException:
                settings = ConnectionSettings()
            hook.__dict__["settings"] = settings
        if "credentials_and_project" not in hook.__dict__:
            found = await asyncio.to_thread(lambda: hook.credentials_and_project)
            hook.__dict__["credentials_and_project"] = found
        share_auth(key, hook.__dict__["settings"], hook.__dict__["credentials_and_project"])

    async def _auth_headers(self) -> dict[str, str]:
        """A bearer token, refreshed in a thread when it is missing or about to expire."""
        hook: Any = self
        if hook.is_local:
            return {}
        credentials = hook.credentials_and_project[0]
        if not credentials.valid:
            async with refresh_lock(credentials):
                if not credentials.valid:
                    from google.auth.transport.requests import Request

                    await asyncio.to_thread(credentials.refresh, Request())
        return {"Authorization": f"Bearer {credentials.token}"}
