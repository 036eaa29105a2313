"""Short stable hashes: how a name cut to fit a limit stays distinct from every other name.

Job IDs (128 characters) and label values (63) are often shorter than what they must tell
apart: a 200-character prefix, a long run id. Cutting alone merges names that differ only
past the cut; keeping a hash of the whole original keeps them apart.

Why 12 hex digits: 48 bits. By the birthday bound, n distinct names share a hash with
probability at most n(n-1)/2 / 2**48: for 1,000 names (a large mapped task) under 2e-9, for
a million under 2e-3. Hex also never reads as an attempt suffix (``_r2``): ``r`` is no hex digit.
"""

from __future__ import annotations

import hashlib
import json

HASH_LENGTH = 12


def short_hash(*parts: object) -> str:
    """12 lowercase hex digits of the sha256 of ``parts`` (as strings); the same on every host.

    The parts are JSON-encoded as a list, so ``("a_b", "c")`` and ``("a", "b_c")`` differ.
    """
    encoded = json.dumps([str(part) for part in parts], ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:HASH_LENGTH]


def shorten(text: str, limit: int, *, sep: str, original: object = None) -> str:
    """``text`` if it fits in ``limit``; else its start, ``sep`` and a hash of the whole.

    The hash is of ``original`` when given (what ``text`` was cleaned from), so two originals
    that clean to the same long text still differ. ``sep`` is not left doubled at the cut.
    """
    if len(text) <= limit:
        return text
    digest = short_hash(text if original is None else original)
    return text[: limit - len(sep) - HASH_LENGTH].rstrip(sep) + sep + digest
