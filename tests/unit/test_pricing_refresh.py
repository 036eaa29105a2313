"""The price table's refresh against a small HTTP server that answers in the Billing Catalog API's shape.

The server is real (127.0.0.1, http.server), the client the refresh's own (httpx, and google-auth's
request signing when credentials are given): two pages of ``services.skus.list``, with SKUs that
price a machine, a Spot machine, a GPU, and ones that name nothing we price.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from airflow_aip.exceptions import ApiError
from airflow_aip.hooks.billing import list_skus
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.pricing import main


def sku(
    description: str,
    nanos: int,
    units: int = 0,
    usage: str = "OnDemand",
    unit: str = "h",
    region: str = "us-central1",
) -> dict[str, Any]:
    return {
        "name": f"services/C7E2-9256-1C43/skus/{abs(hash(description)) % 10**8}",
        "description": description,
        "category": {"serviceDisplayName": "Vertex AI", "resourceFamily": "Compute", "usageType": usage},
        "serviceRegions": [region],
        "pricingInfo": [
            {
                "pricingExpression": {
                    "usageUnit": unit,
                    "tieredRates": [
                        {
                            "startUsageAmount": 0,
                            "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos},
                        }
                    ],
                }
            }
        ],
    }


PAGES = [
    [
        sku("Vertex AI: Training on N1 Standard 4 running in Americas", 230000000),  # was 0.218499
        sku("Vertex AI: Training on Spot N1 Standard 4 running in Americas", 70000000, usage="Preemptible"),
        sku("Vertex AI: Prediction on N1 Standard 4 running in Americas", 1),  # not training
    ],
    [
        sku("Vertex AI: Training on Nvidia L4 GPU running in Americas", 644046000),
        sku("Vertex AI: Training on Nvidia Tesla T4 GPU running in Americas", 402500000),  # unchanged
        sku("Vertex AI: Training commitment N1 Standard 4", 1, usage="Commit1Yr"),
        # a fee is a fraction of a price: never a row (the H100's is 1.4694826 against 11.2660332)
        sku("Vertex AI: Training/Pipelines management fee on NVIDIA H100 80GB in Iowa", 469482600, 1),
        # a family's per-vCPU and per-GB SKUs price its machine types whose memory is known
        sku(
            "Vertex AI: Training/Pipelines on N1 Predefined Instance Core running in Netherlands",
            40000000,
            region="europe-west4",
        ),
        sku(
            "Vertex AI: Training/Pipelines on N1 Predefined Instance Ram running in Netherlands",
            5000000,
            unit="GiBy.h",
            region="europe-west4",
        ),
    ],
]


class Catalog(BaseHTTPRequestHandler):
    seen: list[dict[str, list[str]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        type(self).seen.append({**query, "authorization": [self.headers.get("Authorization") or ""]})
        if url.path != "/v1/services/C7E2-9256-1C43/skus" or query.get("key") == ["bad"]:
            self._answer(403, {"error": {"code": 403, "message": "API key not valid"}})
            return
        page = int((query.get("pageToken") or ["0"])[0])
        body: dict[str, Any] = {"skus": PAGES[page]}
        if page + 1 < len(PAGES):
            body["nextPageToken"] = str(page + 1)
        self._answer(200, body)

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def catalog() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Catalog)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Catalog.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_refresh_writes_the_rows_the_catalog_prices_and_prints_what_changed(
    catalog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "table.json"
    assert main(["refresh", "--endpoint", catalog, "--api-key", "k", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "~ machine n1-standard-4 in us-central1: 0.218499 -> 0.23" in printed
    assert "+ spot machine n1-standard-4 in us-central1: 0.07" in printed
    assert "+ accelerator NVIDIA_L4 in us-central1: 0.644046" in printed
    assert not any("NVIDIA_TESLA_T4" in line for line in printed)  # same price: no change
    assert "3 SKUs named nothing we price" in printed[-1]
    assert not any("H100" in line for line in printed)
    assert "+ machine n1-standard-8 in europe-west4: 0.47" in printed  # 8 x 0.04 + 30 GB x 0.005
    table = PriceTable.load(out)
    assert table.data["regions"]["us-central1"]["spot"]["machines"]["n1-standard-4"] == 0.07
    assert table.data["regions"]["us-central1"]["machines"]["n1-standard-8"] == 0.436998  # kept
    assert table.provenance("europe-west4/machines/n1-highmem-2") == "sourced"  # by the fetch
    assert table.provenance("us-central1/machines/n1-standard-8") == "unverified"  # kept as it was
    assert table.source == f"{catalog}v1/services/C7E2-9256-1C43/skus"
    assert "fetched from the Billing Catalog API" in table.data["source"]["how"]
    assert [q.get("pageToken") for q in Catalog.seen] == [None, ["1"]]
    assert all(q["key"] == ["k"] and q["currencyCode"] == ["USD"] for q in Catalog.seen)


def test_credentials_sign_the_request_with_google_auth(catalog: str) -> None:
    from google.oauth2.credentials import Credentials

    token = Credentials(token="ya29.local-token")  # a token that needs no refresh
    assert len(list_skus("C7E2-9256-1C43", endpoint=catalog, credentials=token)) == 9
    assert Catalog.seen[0]["authorization"] == ["Bearer ya29.local-token"]


def test_a_refused_read_is_an_api_error_and_writes_nothing(catalog: str, tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    with pytest.raises(ApiError, match="403"):
        main(["refresh", "--endpoint", catalog, "--api-key", "bad", "--out", str(out)])
    assert not out.exists()
