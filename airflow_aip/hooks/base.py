"""The Airflow side of every Google hook: which connection, and which identity it stands for.

The connection's extras are parsed by :mod:`airflow_aip.hooks.credentials` (the Google
provider's names, so a user's ``google_cloud_default`` keeps working). When the connection does
not exist, Application Default Credentials apply, and that is logged.

google.auth is imported inside functions: this module is on the DAG-parse path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_aip.hooks.credentials import (
    DEFAULT_SCOPES,
    ConnectionSettings,
    anonymous_credentials,
    load_credentials,
    normalize_chain,
)

__all__ = [
    "DEFAULT_CONN_ID",
    "DEFAULT_SCOPES",
    "ConnectionSettings",
    "GoogleCloudBaseHook",
    "anonymous_credentials",
    "env_flag",
    "load_credentials",
]

DEFAULT_CONN_ID = "google_cloud_default"
# Where the sensor, cancel and export look for a job given by our ID (a resource name carries its
# own): Google's Vertex AI SDK defaults its location the same way (``aiplatform.init``).


class GoogleCloudBaseHook(BaseHook):
    """Reads the Airflow connection once; subclasses build their client from it.

    :param gcp_conn_id: the Airflow connection (provider-google extras; missing => ADC).
    :param impersonation_chain: an account, or a chain ending in one, to act as (wins over the
        connection's ``impersonation_chain`` extra), as in the Google provider.
    """

    conn_name_attr = "gcp_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    hook_name = "Google Cloud (airflow_aip)"

    def __init__(
        self,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        *,
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = normalize_chain(impersonation_chain)

    @cached_property
    def settings(self) -> ConnectionSettings:
        """The connection's settings; a missing connection means Application Default Credentials."""
        from airflow_aip.compat import AirflowNotFoundException

        try:
            conn = self.get_connection(self.gcp_conn_id)
        except AirflowNotFoundException:
            self.log.info("Connection %r not found: using Application Default Credentials", self.gcp_conn_id)
            return ConnectionSettings()
        return ConnectionSettings.from_extras(dict(conn.extra_dejson or {}))

    def load_credentials(self) -> tuple[Any, str | None]:
        """``(credentials, project)`` of the connection and this hook's impersonation chain."""
        return load_credentials(self.settings, self.impersonation_chain)


def env_flag(name: str) -> str | None:
    """An environment variable's value, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None
