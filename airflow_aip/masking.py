"""Carry the secrets a task masked to the trigger that relays its job's log from another process.

Airflow masks a value (a Variable or connection field it resolved, a value given to
``mask_secret``) only in the process that learnt it, and in that process's supervisor. A
deferred task's job log is relayed by the triggerer, which never learnt them: a job printing
its own arguments would put a Variable's value in the stored task log. So before deferring,
the task picks out the masked values that occur in the job's request (only those can be
echoed by the job because we sent them) and hands them to the trigger as a keyword argument;
Airflow stores trigger kwargs Fernet-encrypted, as it does connections. The trigger registers
them with ``amask_secret`` (the sync ``mask_secret`` before Airflow 3.3: airflow_aip.compat) before
it relays a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from airflow.sdk._shared.secrets_masker import _secrets_masker

from airflow_aip.compat import async_mask


def masked_values_in(value: Any) -> list[str]:
    """Every substring of the strings in ``value`` that this process's secrets masker hides."""
    replacer = _secrets_masker().replacer
    if replacer is None:
        return []
    return sorted({match.group(0) for text in _strings(value) for match in replacer.finditer(text)})


async def amask_values(values: Iterable[str]) -> None:
    """Register values with this process's masker (and its supervisor's), before logging a line."""
    mask = async_mask()
    for value in values:
        await mask(value)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
