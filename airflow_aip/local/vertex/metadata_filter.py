"""The ``filter`` of Vertex AI Metadata's lists (contexts, artifacts, executions; AIP-160 subset).

What Google's SDK sends (``google.cloud.aiplatform.metadata.utils._make_filter_string``) and
what ``ListContextsRequest.filter``'s documentation lists: comparisons ``=`` and ``!=`` (and
``< <= > >=`` on times and numbers) on ``name``, ``display_name``, ``schema_title``,
``schema_version``, ``uri``, ``state``, ``create_time``, ``update_time`` and
``metadata.<key>.<string_value|number_value|bool_value>``; ``in_context("<context name>")``
(artifacts and executions attributed to that context); ``parent_contexts:"<name>"[,"<name>"]``
and ``child_contexts:"<name>"`` (contexts); ``AND``, ``OR``, ``NOT`` and parentheses. Anything
else is a 400 on ``filter`` that says what is understood, never a silent match-all
(red locally where Google might be green: its grammar is wider [U]).

Pure: a parsed filter is a predicate over a :class:`Node`'s view, handed in by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError

_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<op><=|>=|!=|=|<|>|:)|(?P<punct>[(),])|(?P<word>[^\s(),=!<>:"]+))'
)
_FIELDS = (
    "name",
    "display_name",
    "schema_title",
    "schema_version",
    "uri",
    "state",
    "create_time",
    "update_time",
)
_METADATA = re.compile(r"metadata\.(?P<key>[^.]+|\"[^\"]+\")\.(?P<kind>string_value|number_value|bool_value)")
UNDERSTOOD = (
    "the local service filters metadata lists by name, display_name, schema_title, schema_version, "
    'uri, state, create_time, update_time, metadata.<key>.<type>_value, in_context("..."), '
    'parent_contexts:"...", child_contexts:"...", with AND, OR, NOT and parentheses'
)


@dataclass(frozen=True)
class Node:
    """What a filter reads of one listed resource: its fields, and the contexts it is linked to."""

    resource: Mapping[str, Any]
    in_contexts: frozenset[str]  # contexts the artifact or execution was added to
    parents: frozenset[str]  # a context's parent contexts
    children: frozenset[str]  # a context's child contexts


Predicate = Callable[[Node], bool]
_CAMEL = {"display_name": "displayName", "schema_title": "schemaTitle", "schema_version": "schemaVersion"}
_CAMEL |= {"create_time": "createTime", "update_time": "updateTime"}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None or found.end() == position:
            if not text[position:].strip():
                break
            raise ValidationError("filter", f"cannot read {text[position:]!r}: {UNDERSTOOD}")
        kind = found.lastgroup or ""
        tokens.append((kind, found.group(kind)))
        position = found.end()
    return tokens


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1]) if literal.startswith('"') else literal


def _compare(actual: Any, op: str, literal: str) -> bool:
    literal_value: Any
    if isinstance(actual, bool) or literal in ("true", "false"):
        actual, literal_value = str(actual).lower(), literal.lower()
    elif isinstance(actual, (int, float)):
        try:
            literal_value = float(literal)
        except ValueError:
            return False
    else:
        actual, literal_value = "" if actual is None else str(actual), literal
    checks = {
        "=": lambda: actual == literal_value,
        "!=": lambda: actual != literal_value,
        "<": lambda: actual < literal_value,
        "<=": lambda: actual <= literal_value,
        ">": lambda: actual > literal_value,
        ">=": lambda: actual >= literal_value,
    }
    return bool(checks[op]())


def _field_value(field: str) -> Callable[[Node], Any]:
    if field in _FIELDS:
        key = _CAMEL.get(field, field)
        return lambda node: node.resource.get(key)
    found = _METADATA.fullmatch(field)
    if found is None:
        raise ValidationError("filter", f"unknown field {field!r}: {UNDERSTOOD}")
    key = _unquote(found["key"])
    return lambda node: (node.resource.get("metadata") or {}).get(key)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        token = self.peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            raise ValidationError("filter", f"expected {value or kind} at token {self.at + 1}: {UNDERSTOOD}")
        self.at += 1
        return token[1]

    def expression(self) -> Predicate:
        """AND of OR-groups (AIP-160: OR binds tighter)."""
        parts = [self.disjunction()]
        while self.peek() == ("word", "AND"):
            self.at += 1
            parts.append(self.disjunction())
        return lambda node: all(part(node) for part in parts)

    def disjunction(self) -> Predicate:
        parts = [self.unary()]
        while self.peek() == ("word", "OR"):
            self.at += 1
            parts.append(self.unary())
        return lambda node: any(part(node) for part in parts)

    def unary(self) -> Predicate:
        token = self.peek()
        if token == ("word", "NOT"):
            self.at += 1
            inner = self.unary()
            return lambda node: not inner(node)
        if token == ("punct", "("):
            self.at += 1
            inner = self.expression()
            self.take("punct", ")")
            return inner
        return self.term()

    def term(self) -> Predicate:
        field = self.take("word")
        if field == "in_context":
            self.take("punct", "(")
            context = _unquote(self.take("string"))
            self.take("punct", ")")
            return lambda node: context in node.in_contexts
        op = self.take("op")
        if field in ("parent_contexts", "child_contexts"):
            return self.links(field, op)
        if op == ":":
            raise ValidationError("filter", f"{field} takes = != < <= > >=, not ':': {UNDERSTOOD}")
        token = self.peek()
        if token is None or token[0] not in ("string", "word"):
            raise ValidationError("filter", f"{field} {op} needs a value: {UNDERSTOOD}")
        self.at += 1
        value, literal = _field_value(field), _unquote(token[1])
        return lambda node: _compare(value(node), op, literal)

    def links(self, field: str, op: str) -> Predicate:
        if op != ":":
            raise ValidationError("filter", f'{field} takes ":" (has), not {op!r}: {UNDERSTOOD}')
        names = {_unquote(self.take("string"))}
        while self.peek() == ("punct", ","):
            self.at += 1
            names.add(_unquote(self.take("string")))
        if field == "parent_contexts":
            return lambda node: bool(names & node.parents)
        return lambda node: bool(names & node.children)


def parse_metadata_filter(text: str | None) -> Predicate | None:
    """The predicate ``text`` says (None for no filter); ValidationError on ``filter`` otherwise."""
    if not text or not text.strip():
        return None
    parser = _Parser(text)
    predicate = parser.expression()
    if parser.peek() is not None:
        raise ValidationError("filter", f"unexpected {parser.peek()[1]!r}: {UNDERSTOOD}")  # type: ignore[index]
    return predicate
