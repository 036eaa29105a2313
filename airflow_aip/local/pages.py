"""Pages of the local service's lists: one page-token codec, one page size rule, one newest-first page.

A page token is a position (where the next page starts) as URL-safe base64 of a small JSON
object: ``{"before": seq}`` for the job lists, ``{"after": [createTime, id]}`` for the training
pipelines, ``{"offset": n}`` for log entries, ``{"last", "place", "query"}`` for the models. A
token that does not decode, or does not hold what its list reads, is the same 400 everywhere:
``pageToken: is not a token this service issued``.

Pure: no store, no I/O.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from airflow_aip.exceptions import ValidationError

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
PAGE_TOKEN = "pageToken"
NOT_ISSUED = "is not a token this service issued"

T = TypeVar("T")
E = TypeVar("E")


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


P = TypeVar("P", bound=_Ordered)


def encode_token(position: Mapping[str, Any]) -> str:
    """The page token of ``position`` (a JSON object)."""
    return base64.urlsafe_b64encode(json.dumps(dict(position)).encode()).decode()


def decode_token(token: str | None, read: Callable[[Any], T]) -> T | None:
    """``read`` of the position ``token`` holds (None for no token); any token ``read`` fails on is a 400."""
    if not token:
        return None
    try:
        return read(json.loads(base64.urlsafe_b64decode(token.encode())))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError(PAGE_TOKEN, NOT_ISSUED) from exc


def page_size(asked: int | None) -> int:
    """How many items a page holds: the default when ``pageSize`` is absent or 0, at most the maximum."""
    if asked is not None and asked < 0:
        raise ValidationError("pageSize", f"must not be negative, got {asked}")
    return min(asked or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def newest_first(
    entries: Iterable[tuple[P, E]], after: P | None, size: int, shown: Callable[[E], T | None]
) -> tuple[list[T], P | None]:
    """Up to ``size`` entries past ``after``, as ``shown`` answers them; and the position after the last.

    ``entries`` come newest first, each with its position (older is smaller), and are read only
    as far as the page needs; an entry ``shown`` answers None for is not listed. The position is
    None when nothing follows the page.
    """
    taken: list[tuple[P, T]] = []
    for position, entry in entries:
        if after is not None and not position < after:
            continue
        item = shown(entry)
        if item is None:
            continue
        taken.append((position, item))
        if len(taken) > size:
            return [item for _, item in taken[:size]], taken[size - 1][0]
    return [item for _, item in taken], None


def answer(key: str, items: list[Any], next_token: str | None) -> dict[str, Any]:
    """A list's answer: ``{key: items}`` (absent when empty, as Google's JSON is), and ``nextPageToken``."""
    response: dict[str, Any] = {key: items} if items else {}
    if next_token is not None:
        response["nextPageToken"] = next_token
    return response


class Sequenced(Protocol):
    """A stored item numbered in the order it was stored (a job's view in the store)."""

    @property
    def seq(self) -> int: ...


S = TypeVar("S", bound=Sequenced)


def newest_stored_page(
    views: Iterable[S], key: str, page_token: str | None, size: int, shown: Callable[[S], T | None]
) -> dict[str, Any]:
    """One page of stored ``views`` (newest first) under ``key``; a token is the page's last ``seq``.

    A job stored meanwhile has a higher number, so it never shifts a later page.
    """
    before = decode_token(page_token, lambda token: int(token["before"]))
    items, last = newest_first(((view.seq, view) for view in views), before, size, shown)
    return answer(key, items, None if last is None else encode_token({"before": last}))
