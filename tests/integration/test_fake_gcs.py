"""The emulator the integration tier stands on answers like GCS, including preconditions."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_upload_and_read_back(bucket: Any) -> None:
    blob = bucket.blob("a/b.txt")
    blob.upload_from_string(b"hello")
    assert bucket.blob("a/b.txt").download_as_bytes() == b"hello"


def test_generation_precondition_is_enforced(bucket: Any) -> None:
    from google.api_core.exceptions import PreconditionFailed

    bucket.blob("once").upload_from_string(b"first", if_generation_match=0)
    with pytest.raises(PreconditionFailed):
        bucket.blob("once").upload_from_string(b"second", if_generation_match=0)
    assert bucket.blob("once").download_as_bytes() == b"first"
