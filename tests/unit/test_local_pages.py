"""The local service's one page-token codec and its newest-first page (:mod:`airflow_aip.local.pages`)."""

from __future__ import annotations

import base64

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.local import pages
from airflow_aip.local.log_entries import _page_offset
from airflow_aip.local.vertex.pipelines_list import list_page


def test_a_token_round_trips_as_urlsafe_base64_json() -> None:
    token = pages.encode_token({"before": 7})
    assert base64.urlsafe_b64decode(token) == b'{"before": 7}'
    assert pages.decode_token(token, lambda t: int(t["before"])) == 7
    assert pages.decode_token("", lambda t: int(t["before"])) is None


@pytest.mark.parametrize(
    "token",
    [
        "nonsense",  # not base64 of JSON
        pages.encode_token({"after": 3}),  # another list's position
        base64.urlsafe_b64encode(b"[1, 2]").decode(),  # not an object
        base64.urlsafe_b64encode(b'{"before": "x"}').decode(),
    ],
)
def test_a_token_the_list_cannot_read_is_the_one_400(token: str) -> None:
    with pytest.raises(ValidationError) as err:
        pages.decode_token(token, lambda t: int(t["before"]))
    assert (err.value.field, str(err.value)) == ("pageToken", "pageToken: is not a token this service issued")


def test_every_list_refuses_a_token_it_did_not_issue_with_the_same_words() -> None:
    for read in (_page_offset, lambda token: list_page([], None, None, token, None)):
        with pytest.raises(ValidationError, match="is not a token this service issued"):
            read("nonsense")
    with pytest.raises(ValidationError, match="is not a token this service issued"):
        _page_offset(pages.encode_token({"offset": -1}))


@pytest.mark.parametrize(("asked", "size"), [(None, 20), (0, 20), (5, 5), (1000, 100)])
def test_the_page_size_rule(asked: int | None, size: int) -> None:
    assert pages.page_size(asked) == size


def test_a_negative_page_size_is_refused() -> None:
    with pytest.raises(ValidationError, match="pageSize"):
        pages.page_size(-1)


def test_pages_run_newest_first_and_continue_after_the_last_given() -> None:
    entries = [(9, "i"), (8, "h"), (7, "skip"), (6, "f"), (5, "e")]

    def shown(entry: str) -> str | None:
        return None if entry == "skip" else entry.upper()

    first, after = pages.newest_first(entries, None, 2, shown)
    assert (first, after) == (["I", "H"], 8)
    second, after = pages.newest_first(entries, after, 2, shown)
    assert (second, after) == (["F", "E"], None)


def test_an_answer_leaves_out_an_empty_list_and_a_missing_token() -> None:
    assert pages.answer("jobs", [], None) == {}
    assert pages.answer("jobs", [1], "t") == {"jobs": [1], "nextPageToken": "t"}
