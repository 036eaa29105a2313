"""A JSON manifest as read from Cloud Storage, with the generation a conditional replace must match.

A value type on its own: the storage hook reads one (:meth:`StorageHook.read_manifest`), the
export plan decides from one whether a model's or the champion's manifest is rewritten, and the
champion ledger of the promotion operator replaces one; none of them needs the others for it.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StoredManifest:
    """A manifest as read, with the generation a conditional replace of it must match."""

    generation: int
    content: Mapping[str, Any]
