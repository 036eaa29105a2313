"""Google's published messages to and from the JSON the REST face's handlers take and answer.

The gRPC face has no protos of its own: google-cloud-aiplatform's proto-plus classes
(``google.cloud.aiplatform_v1.types``) and google.longrunning's ``operations_pb2`` parse the
bytes and write the answer. In between, a request is the JSON a REST client would have sent
(camelCase, enums as names, int64 as strings: ``json_format``'s proto3 JSON), so a field is
checked once, by the handler both faces call.
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from airflow_aip.exceptions import ValidationError

_PARENT = re.compile(r"projects/([^/]+)/locations/([^/]+)")
_RESOURCE = re.compile(r"projects/([^/]+)/locations/([^/]+)/([A-Za-z]+)/([^/]+)")


class MalformedMessage(Exception):
    """The request's bytes are not the method's message (truncated, or another message)."""


def pb_class(message_type: Any) -> type[Message]:
    """The protobuf class of a proto-plus class (``CustomJob``), or the class itself (``Operation``)."""
    if isinstance(message_type, type) and issubclass(message_type, Message):
        return message_type
    return message_type.pb()  # type: ignore[no-any-return]


def parse_request(message_type: Any, data: bytes) -> dict[str, Any]:
    """The request's fields as REST's JSON; MalformedMessage if ``data`` is not one."""
    message = pb_class(message_type)()
    try:
        message.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise MalformedMessage(f"the request is not a valid {message.DESCRIPTOR.full_name}: {exc}") from exc
    fields: dict[str, Any] = json_format.MessageToDict(message)
    return fields


def render_response(message_type: Any, answer: dict[str, Any]) -> bytes:
    """The handler's JSON answer as the method's response message, serialized."""
    message = json_format.ParseDict(answer, pb_class(message_type)(), ignore_unknown_fields=True)
    serialized: bytes = message.SerializeToString()
    return serialized


def parent_of(name: str, field: str = "parent") -> tuple[str, str]:
    """``(project, location)`` of ``projects/{project}/locations/{location}``."""
    found = _PARENT.fullmatch(name or "")
    if found is None:
        raise ValidationError(field, f"must be projects/{{project}}/locations/{{location}}; got {name!r}")
    return found[1], found[2]


def resource_of(name: str, collection: str, field: str = "name") -> tuple[str, str, str]:
    """``(project, location, id)`` of ``projects/{p}/locations/{l}/{collection}/{id}``."""
    found = _RESOURCE.fullmatch(name or "")
    if found is None or found[3] != collection:
        rule = f"must be projects/{{project}}/locations/{{location}}/{collection}/{{id}}; got {name!r}"
        raise ValidationError(field, rule)
    return found[1], found[2], found[4]


def list_query(request: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """A list request's fields as REST's query parameters (strings), those the method has."""
    return {name: str(request[name]) for name in names if request.get(name) not in (None, "", 0)}
