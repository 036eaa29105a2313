"""A replica's HTTPS: where each host goes, and requests reframed for a strict server."""

from __future__ import annotations

import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.egress.framing import FramingError, RequestStream
from airflow_aip.local.egress.front import storage_front
from airflow_aip.local.egress.routes import Way, way_of


@pytest.mark.parametrize(
    ("host", "port", "way", "said"),
    [
        ("storage.googleapis.com", 443, Way.FRONT, "emulator"),
        ("WWW.googleapis.com.", 443, Way.FRONT, "emulator"),
        ("storage.googleapis.com", 8443, Way.REFUSE, "stay on this machine"),
        ("oauth2.googleapis.com", 443, Way.REFUSE, "stay on this machine"),
        ("europe-west4-aiplatform.googleapis.com", 443, Way.VERTEX, "the local service"),
        ("europe-west4-aiplatform.googleapis.com", 8443, Way.REFUSE, "port 443 of its API hosts"),
        ("bigquery.googleapis.com", 443, Way.REFUSE, "refuses bigquery.googleapis.com"),
        ("accounts.google.com", 443, Way.REFUSE, "stay on this machine"),
        ("metadata.google.internal", 80, Way.REFUSE, "GCE_METADATA_HOST"),
        ("169.254.169.254", 80, Way.REFUSE, "GCE_METADATA_HOST"),
        ("pypi.org", 443, Way.TUNNEL, "not Google's"),
        ("googleapis.com.example.org", 443, Way.TUNNEL, "not Google's"),
    ],
)
def test_each_host_goes_one_way(host: str, port: int, way: Way, said: str) -> None:
    got, why = way_of(host, port)
    assert got is way
    assert said in why


def _fed(*pieces: bytes) -> bytes:
    stream = RequestStream()
    return b"".join(stream.feed(p) for p in pieces)


TF_EMPTY_POST = (
    b"POST /upload/storage/v1/b/bk/o?uploadType=resumable&name=x HTTP/1.1\r\n"
    b"Host: www.googleapis.com\r\nContent-Length: 0\r\nTransfer-Encoding: identity\r\n\r\n"
)


def test_tensorflows_identity_coding_is_dropped_and_the_rest_passes() -> None:
    out = _fed(TF_EMPTY_POST)
    assert b"Transfer-Encoding" not in out
    assert out == TF_EMPTY_POST.replace(b"Transfer-Encoding: identity\r\n", b"")


def test_a_body_is_never_read_as_a_head_even_split_across_reads() -> None:
    body = b"Transfer-Encoding: identity\r\n\r\nGET / HTTP/1.1\r\n\r\n"  # bytes, not a head
    first = b"PUT /o HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    second = b"GET /b HTTP/1.1\r\nTransfer-Encoding: identity\r\nContent-Length: 0\r\n\r\n"
    whole = first + second
    out = _fed(*(whole[i : i + 7] for i in range(0, len(whole), 7)))
    assert out == first + second.replace(b"Transfer-Encoding: identity\r\n", b"")


def test_chunked_bodies_pass_whole_and_the_next_head_is_fixed() -> None:
    chunked = (
        b"POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    out = _fed(chunked[:30], chunked[30:], TF_EMPTY_POST)
    assert out.startswith(chunked)
    assert out[len(chunked) :] == TF_EMPTY_POST.replace(b"Transfer-Encoding: identity\r\n", b"")


def test_identity_before_chunked_is_dropped_but_chunked_kept() -> None:
    head = b"POST /u HTTP/1.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n"
    assert _fed(head) == head


def test_what_is_not_http_is_refused() -> None:
    with pytest.raises(FramingError, match="not hex"):
        _fed(b"POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    with pytest.raises(FramingError, match="no end of head"):
        _fed(b"x" * 70_000)


def test_jobs_starting_together_share_one_front_with_whole_files(tmp_path: Path) -> None:
    """Two jobs starting at once once made two fronts writing the same key file: one read it half-written."""
    start = threading.Barrier(6)
    fronts: list[Any] = []

    def first_job() -> None:
        start.wait()
        fronts.append(storage_front("http://127.0.0.1:9", tmp_path / "egress"))

    threads = [threading.Thread(target=first_job) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(fronts) == 6
    assert len({id(front) for front in fronts}) == 1
    context = ssl.create_default_context(cafile=str(fronts[0].bundle))
    assert context.cert_store_stats()["x509_ca"] > 1  # the public roots and the service's own
