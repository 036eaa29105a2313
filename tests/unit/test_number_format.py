"""The server's half of the one number format (the browser's half: tests/integration/test_ui_pages.py)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.jobs.numbers import number_text, signed_text
from tests.fixtures.number_cases import NUMBER_CASES, SIGNED_CASES


@pytest.mark.parametrize(("value", "text"), NUMBER_CASES, ids=[repr(v) for v, _ in NUMBER_CASES])
def test_number_text_writes_each_case(value: Any, text: str) -> None:
    assert number_text(value) == text


@pytest.mark.parametrize(("value", "text"), SIGNED_CASES)
def test_signed_text_always_writes_the_sign(value: Any, text: str) -> None:
    assert signed_text(value) == text
