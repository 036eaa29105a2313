"""The ``filter`` strings Google list methods take (AIP-160 subset), for jobs and log entries.

``projects.jobs.list`` and logging's ``entries.list`` both filter with expressions such as
``jobId:census* AND state=FAILED`` or ``resource.labels.job_id="j1" AND timestamp>"2024-..."``.
Supported: comparisons ``= != < <= > >= :`` on dotted field paths (a quoted segment for keys
with dots, ``labels."ml.googleapis.com/trial_id"``), ``AND`` (also implied by a space),
``OR`` (binding tighter than AND, as AIP-160 says), ``NOT`` / ``-``, parentheses, and ``*``
wildcards in values. Numbers compare as numbers and RFC 3339 strings as instants.
A filter outside this grammar is a ValidationError on ``filter``, never a silent match-all.

A list method also names the fields it filters on (``fields``): ml v1's jobs.list the Job's
fields, Vertex's ``display_name``, ``state``, ``create_time`` and ``labels.<key>`` with the
operators its documentation gives each. Anything else, ``jobId="a" OR 1=1`` included, is a 400
naming the field, as Google answers. A field may also check its literals (:attr:`FilterField.literal`):
Vertex's ``state`` takes only ``JOB_STATE_*`` names, ``create_time`` only RFC 3339 instants,
``labels.k`` only ``=`` or ``:*``, and its ``display_name:`` is case-sensitive; ml v1's fields
keep gcloud's leniency (``state:failed``).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import JOB_SCHEMA, schema
from airflow_aip.local.clock import parse_rfc3339, rfc3339

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<op><=|>=|!=|=|<|>|:)
    | (?P<paren>[()])
    | (?P<word>[^\s()=!<>:"]+)
    )""",
    re.VERBOSE,
)
_MISSING = object()
# How every string float() accepts begins (its spaces, digits and inf/nan are Unicode-aware, as here).
_INTEGER = re.compile(r"\s*[-+]?\d+\s*")
_NUMBER_START = re.compile(r"\s*[-+]?(?:\d|\.\d|inf|nan)", re.IGNORECASE)
ALL_OPS = frozenset({"=", "!=", "<", "<=", ">", ">=", ":"})
# RFC 3339 date-time (section 5.6; "T" and "Z" may be lowercase there), up to nanoseconds.
_RFC3339 = re.compile(
    r"(?P<head>[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
# (field name, operator, literal) -> (operator, literal) as compared; raises ValidationError.
LiteralCheck = Callable[[str, str, str], tuple[str, str]]


@dataclass(frozen=True)
class FilterField:
    """A field a list filter may name: where it is in the resource and which operators it takes."""

    target: tuple[str, ...]
    ops: frozenset[str] = ALL_OPS
    keyed: bool = False  # labels.<key>: exactly one segment after the name
    nested: bool = False  # any sub-path (ml v1: trainingInput.region)
    literal: LiteralCheck | None = None  # checks each literal, and gives the form compared


def _exact_wildcard(name: str, op: str, value: str) -> tuple[str, str]:
    """``display_name:"my_job_*"`` (Vertex's ":" wildcard): matched case-sensitively, as ``=`` is.

    [U] unverified: what ":" without a ``*`` means on Vertex; taken as equality.
    """
    return ("=" if op == ":" else op), value


def _key_presence(name: str, op: str, value: str) -> tuple[str, str]:
    """Vertex's labels: ``labels.key=value`` and ``labels.key:*`` (presence), no other ":"."""
    if op == ":" and value != "*":
        raise ValidationError("filter", f"{name}:{value!r}: a label takes = (labels.key=value) or :* only")
    return op, value


@cache
def _vertex_job_states() -> tuple[str, ...]:
    return tuple(schema("GoogleCloudAiplatformV1CustomJob", AIPLATFORM_V1)["properties"]["state"]["enum"])


def _job_state(name: str, op: str, value: str) -> tuple[str, str]:
    """``state="JOB_STATE_SUCCEEDED"``; ``state=SUCCEEDED`` (ml v1's name) is a 400, not an empty list.

    [U] unverified: whether Google also takes the enum's number (``state=4``); refused here.
    """
    if value not in _vertex_job_states():
        raise ValidationError(
            "filter", f"{name}: {value!r} is not a JobState; one of {', '.join(_vertex_job_states())}"
        )
    return op, value


def _rfc3339_instant(name: str, op: str, value: str) -> tuple[str, str]:
    """``create_time`` "must be in RFC 3339 format": made canonical (as stored): ``=`` compares instants."""
    match = _RFC3339.fullmatch(value)
    try:
        if match is None:
            raise ValueError(value)
        micros = (match["fraction"] or "").ljust(6, "0")[:6]  # what fromisoformat takes on Python 3.10
        if (match["fraction"] or "")[6:].strip("0"):  # stamps are whole microseconds: cut, ">=" is ">"
            op = {">=": ">", "<": "<="}.get(op, op)
        return op, rfc3339(parse_rfc3339(f"{match['head'].upper()}.{micros}{match['zone']}"))
    except ValueError:
        raise ValidationError(
            "filter", f"{name}: {value!r} is not an RFC 3339 time such as 2021-05-18T00:00:00Z"
        ) from None


FilterFields = Mapping[str, FilterField]
VERTEX_JOB_FILTER_FIELDS: FilterFields = {
    "display_name": FilterField(("displayName",), frozenset({"=", "!=", ":"}), literal=_exact_wildcard),
    "state": FilterField(("state",), frozenset({"=", "!="}), literal=_job_state),
    "create_time": FilterField(("createTime",), ALL_OPS - {":"}, literal=_rfc3339_instant),
    "labels": FilterField(("labels",), frozenset({"=", ":"}), keyed=True, literal=_key_presence),
}


@cache
def _ml_job_fields() -> dict[str, FilterField]:
    return {name: FilterField((name,), nested=True) for name in schema(JOB_SCHEMA)["properties"]}


class _MlJobFields(Mapping[str, FilterField]):
    """ml v1's Job fields, read from the discovery document when first used."""

    def __getitem__(self, key: str) -> FilterField:
        return _ml_job_fields()[key]

    def __iter__(self) -> Any:
        return iter(_ml_job_fields())

    def __len__(self) -> int:
        return len(_ml_job_fields())


ML_JOB_FILTER_FIELDS: FilterFields = _MlJobFields()


def _resolve_field(
    path: list[str], op: str, value: str, fields: FilterFields | None
) -> tuple[tuple[str, ...], str, str]:
    """``(resource path, op, value)`` for a comparison; a 400 for names (and literals) the method refuses."""
    if fields is None:
        return tuple(path), op, value
    name, rest = path[0], path[1:]
    field = fields.get(name)
    if field is None:
        known = ", ".join(sorted(fields))
        raise ValidationError("filter", f"unknown field {'.'.join(path)!r}; filterable fields: {known}")
    if field.keyed and len(rest) != 1:
        example = f'{name}.team="a"'
        raise ValidationError("filter", f"{name} takes one key, as in {example}; got {'.'.join(path)!r}")
    if rest and not (field.keyed or field.nested):
        raise ValidationError("filter", f"field {name!r} has no sub-field {'.'.join(rest)!r}")
    if op not in field.ops:
        raise ValidationError("filter", f"field {name!r} takes {' '.join(sorted(field.ops))}, not {op!r}")
    if field.literal is not None:
        op, value = field.literal(".".join(path), op, value)
    return field.target + tuple(rest), op, value


class _Token(NamedTuple):  # a tuple, not a frozen dataclass: a poller's filter has 4,000 tokens
    kind: str
    text: str


def _tokenize(text: str) -> list[_Token]:
    tokens, pos = [], 0
    end = len(text.rstrip())  # not text[pos:].isspace() per token: a 20,000-character filter
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValidationError("filter", f"cannot parse {text[pos:]!r}")
        kind = match.lastgroup or ""
        raw = match.group(kind)
        if kind == "string":
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1]) if "\\" in raw else raw[1:-1]
        tokens.append(_Token(kind, raw))
        pos = match.end()
    return tokens


@dataclass(frozen=True)
class Comparison:
    path: tuple[str, ...]
    op: str
    value: str

    def matches(self, item: Any) -> bool:
        found = _resolve(item, self.path)
        if found is _MISSING:
            return self.op == "!="
        candidates = found if isinstance(found, list) else [found]
        if self.op == "!=":
            return not any(_compare(c, "=", self.value) for c in candidates)
        return any(_compare(c, self.op, self.value) for c in candidates)


@dataclass(frozen=True)
class Junction:
    op: str  # "AND" or "OR"
    parts: tuple[Node, ...]

    def matches(self, item: Any) -> bool:
        results = (part.matches(item) for part in self.parts)
        return all(results) if self.op == "AND" else any(results)


@dataclass(frozen=True)
class Negation:
    part: Node

    def matches(self, item: Any) -> bool:
        return not self.part.matches(item)


Node = Comparison | Junction | Negation


def _resolve(item: Any, path: tuple[str, ...]) -> Any:
    for segment in path:
        if isinstance(item, Mapping) and segment in item:
            item = item[segment]
        else:
            return _MISSING
    return item


def _number(value: Any) -> float | None:
    """The value as a number, if it reads as one; whole numbers exactly (a 19-digit Vertex AI job
    ID as a float would equal its neighbours: their logs would answer for each other)."""
    if isinstance(value, bool) or (isinstance(value, str) and not _NUMBER_START.match(value)):
        return None  # the common case, a word, decided without raising (and catching) a ValueError
    if isinstance(value, int) or (isinstance(value, str) and _INTEGER.fullmatch(value)):
        return int(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def equality_key(value: Any) -> float | str | None:
    """What ``=`` (without a wildcard) compares of a value: its number if it reads as one, else its text.

    Two values are ``=`` exactly when their keys are equal and not None (None: equal to nothing,
    as NaN or a mapping), so an index keyed by this finds what a scan with ``_compare`` finds.
    """
    if isinstance(value, Mapping):
        return None
    if isinstance(value, bool):
        value = "true" if value else "false"
    number = _number(value)
    if number is not None:
        return None if math.isnan(number) else number
    return str(value)


@cache
def _wildcard(literal: str) -> re.Pattern[str]:
    """``*`` is the only wildcard of Google's filters (AIP-160); ``?`` and ``[...]`` are literal
    characters, so ``display_name="a?c*"`` does not match ``abc`` (fnmatch would make them wildcards)."""
    return re.compile(".*".join(re.escape(part) for part in literal.split("*")), re.DOTALL)


def _compare(actual: Any, op: str, literal: str) -> bool:
    if op == ":" and literal == "*":
        return True
    if isinstance(actual, Mapping):
        return op == ":" and literal in actual
    if isinstance(actual, bool):
        actual = "true" if actual else "false"
    text = str(actual)
    if op in ("=", ":"):
        if "*" in literal:
            return _wildcard(literal).fullmatch(text) is not None
        left, right = _number(actual), _number(literal)
        if left is not None and right is not None:
            return left == right
        # ":" ("has") is the lenient one: gcloud users write state:failed.
        return text == literal or (op == ":" and text.lower() == literal.lower())
    ordered: tuple[Any, Any] = (text, literal)
    left, right = _number(actual), _number(literal)
    if left is not None and right is not None:
        ordered = (left, right)
    else:
        with contextlib.suppress(ValueError):
            ordered = (parse_rfc3339(text), parse_rfc3339(literal))
    a, b = ordered
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


class _Parser:
    def __init__(self, tokens: list[_Token], fields: FilterFields | None) -> None:
        self.tokens = tokens
        self.pos = 0
        self.fields = fields

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise ValidationError("filter", "ends too early")
        self.pos += 1
        return token

    def expression(self) -> Node:
        parts = [self.disjunction()]
        while (token := self.peek()) is not None and token.text != ")":
            if token.kind == "word" and token.text == "AND":
                self.take()
            parts.append(self.disjunction())
        return parts[0] if len(parts) == 1 else Junction("AND", tuple(parts))

    def disjunction(self) -> Node:
        parts = [self.unary()]
        while (token := self.peek()) is not None and token.kind == "word" and token.text == "OR":
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else Junction("OR", tuple(parts))

    def unary(self) -> Node:
        token = self.take()
        if token.kind == "word" and token.text == "NOT":
            return Negation(self.unary())
        if token.kind == "word" and token.text.startswith("-") and len(token.text) > 1:
            self.tokens[self.pos - 1] = _Token("word", token.text[1:])
            self.pos -= 1
            return Negation(self.unary())
        if token.kind == "paren" and token.text == "(":
            inner = self.expression()
            closing = self.take()
            if closing.text != ")":
                raise ValidationError("filter", "unbalanced parentheses")
            return inner
        return self.comparison(token)

    def comparison(self, first: _Token) -> Node:
        if first.kind != "word":
            raise ValidationError("filter", f"expected a field name, got {first.text!r}")
        path = first.text.split(".")
        while path[-1] == "" and (nxt := self.peek()) is not None and nxt.kind == "string":
            self.take()
            path[-1] = nxt.text
            if (follow := self.peek()) is not None and follow.kind == "word" and follow.text.startswith("."):
                self.take()
                path.extend(follow.text[1:].split("."))
        if any(not segment for segment in path):
            raise ValidationError("filter", f"bad field path {first.text!r}")
        op = self.take()
        if op.kind != "op":
            raise ValidationError("filter", f"expected a comparison after {first.text!r}, got {op.text!r}")
        value = self.take()
        if value.kind not in ("word", "string"):
            raise ValidationError("filter", f"expected a value after {first.text}{op.text}")
        return Comparison(*_resolve_field(path, op.text, value.text, self.fields))


def parse_filter(text: str | None, fields: FilterFields | None = None) -> Node | None:
    """The parsed filter, or None for an empty one (which matches everything).

    With ``fields``, only those names may be filtered on (each mapped to its place in the resource).
    """
    if not text or not text.strip():
        return None
    parser = _Parser(_tokenize(text), fields)
    node = parser.expression()
    if parser.peek() is not None:
        raise ValidationError("filter", f"unexpected {parser.tokens[parser.pos].text!r}")
    return node


def required_equalities(node: Node | None) -> dict[tuple[str, ...], str]:
    """``path -> value`` for each plain ``=`` the whole filter requires (to narrow a scan)."""
    if isinstance(node, Comparison):
        return {node.path: node.value} if node.op == "=" and "*" not in node.value else {}
    if isinstance(node, Junction) and node.op == "AND":
        out: dict[tuple[str, ...], str] = {}
        for part in node.parts:
            out.update(required_equalities(part))
        return out
    return {}


def page_size(value: str | None) -> int | None:
    """A list call's ``pageSize`` query parameter (absent: the service's default)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ValidationError("pageSize", f"must be an integer, got {value!r}") from exc
