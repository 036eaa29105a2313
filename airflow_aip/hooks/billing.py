"""The Billing Catalog API (cloudbilling v1): every SKU of a service, with the user's credentials.

``services.skus.list`` "Lists all publicly available SKUs for a given cloud service" with their
prices. It is read page by page with httpx, authorised by google-auth (Application Default
Credentials, or given credentials) or an API key (the Catalog API takes one). Used only by the
price table's refresh (``python -m airflow_aip.pricing refresh``).
"""

from __future__ import annotations

from typing import Any

from airflow_aip.exceptions import ApiError
from airflow_aip.hooks.credentials import DEFAULT_SCOPES, auth_request

CATALOG_ENDPOINT = "https://cloudbilling.googleapis.com/"
PAGE_SIZE = 5000


def _headers(credentials: Any) -> dict[str, str]:
    if credentials is None:
        return {}
    headers: dict[str, str] = {}
    credentials.before_request(auth_request(), "GET", "", headers)
    return headers


def default_credentials() -> Any:
    """Application Default Credentials, as gcloud and Google's clients find them."""
    import google.auth

    credentials, _ = google.auth.default(scopes=list(DEFAULT_SCOPES))
    return credentials


def list_skus(
    service: str,
    *,
    endpoint: str = CATALOG_ENDPOINT,
    credentials: Any = None,
    api_key: str | None = None,
    currency: str = "USD",
    timeout: float = 60.0,
) -> list[dict[str, Any]]:
    """Every SKU of ``services/{service}``, all pages; ApiError on an answer that is not 200."""
    import httpx

    url = f"{endpoint.rstrip('/')}/v1/services/{service}/skus"
    params: dict[str, Any] = {"currencyCode": currency, "pageSize": PAGE_SIZE}
    if api_key:
        params["key"] = api_key
    skus: list[dict[str, Any]] = []
    with httpx.Client(timeout=timeout) as client:
        while True:
            answer = client.get(url, params=params, headers=_headers(credentials))
            if answer.status_code != 200:
                raise ApiError(answer.status_code, answer.text[:500], method="services.skus.list")
            page = answer.json()
            skus.extend(page.get("skus") or [])
            token = page.get("nextPageToken")
            if not token:
                return skus
            params["pageToken"] = token


def catalog_rows(
    service: str = "", **options: Any
) -> tuple[dict[tuple[str, str, str, str], float], int, str]:
    """The rows the service's SKUs price (:func:`airflow_aip.jobs.vertex.skus.sku_rows`), how many
    SKUs named nothing we know, and the URL they were read from."""
    from airflow_aip.jobs.vertex.skus import VERTEX_AI_SERVICE, sku_rows

    service = service or VERTEX_AI_SERVICE
    rows, skipped = sku_rows(list_skus(service, **options))
    endpoint = str(options.get("endpoint") or CATALOG_ENDPOINT)
    return rows, skipped, f"{endpoint.rstrip('/')}/v1/services/{service}/skus"
