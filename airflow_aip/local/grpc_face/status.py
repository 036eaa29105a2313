"""What a handler's error, or an injected fault, becomes on the wire: a gRPC status with Google's details.

The REST face answers ``{"error": {"code", "message", "status", "details"}}``; a gRPC client
reads the same thing as a status code, a message and ``grpc-status-details-bin`` (a
``google.rpc.Status`` whose details are ``BadRequest``, ``ErrorInfo``...), which
google-api-core turns into the same exception class, with ``.details`` filled. The codes are
the ones REST's ``status`` names, so the two faces cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2, json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2  # noqa: F401  (details' types, by @type)
from grpc_status import rpc_status

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local.api import invalid_argument_message, proto_path
from airflow_aip.local.capacity import ResourceExhaustedError
from airflow_aip.local.permissions import PermissionRefused
from airflow_aip.local.service import FailedPreconditionError
from airflow_aip.local.unserved import UNIMPLEMENTED_MESSAGE, unimplemented_message

# The HTTP status REST answers for each code (what the fault plan's answer counts record).
HTTP_OF = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
}
# An injected fault of an HTTP kind, as the gRPC code Google's front ends answer for it.
FAULT_CODES = {
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    500: grpc.StatusCode.INTERNAL,
    503: grpc.StatusCode.UNAVAILABLE,
}


class Unserved(Exception):
    """A request the REST face would answer 501 for: one of Google's methods this service does not
    serve (``method``: its discovery id, ``aiplatform.projects.locations.customJobs.operations.get``)."""

    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


@dataclass(frozen=True)
class Failure:
    """A status to answer: its code, message and details (each a JSON detail with ``@type``)."""

    code: grpc.StatusCode
    message: str
    details: tuple[dict[str, Any], ...] = field(default=())

    def status(self) -> grpc.Status:
        return rpc_status.to_status(
            status_pb2.Status(code=self.code.value[0], message=self.message, details=_packed(self.details))
        )


def _packed(details: Iterable[dict[str, Any]]) -> list[any_pb2.Any]:
    packed = []
    for detail in details:
        try:
            packed.append(json_format.ParseDict(detail, any_pb2.Any()))
        except json_format.ParseError:  # a detail type this process cannot name: left out, not fatal
            continue
    return packed


def failure_of(exc: BaseException, rest_path: str) -> Failure:
    """The status REST's envelope would carry for ``exc`` (raised by a handler for ``rest_path``)."""
    if isinstance(exc, ValidationError):
        violation = {"field": exc.field, "description": exc.rule}
        bad_request = {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
        message = invalid_argument_message(rest_path, proto_path(exc.field), exc.rule)
        return Failure(grpc.StatusCode.INVALID_ARGUMENT, message, (bad_request,))
    if isinstance(exc, JobNotFoundError):
        return Failure(grpc.StatusCode.NOT_FOUND, exc.message)
    if isinstance(exc, JobAlreadyExistsError):
        return Failure(grpc.StatusCode.ALREADY_EXISTS, exc.message)
    if isinstance(exc, FailedPreconditionError):
        return Failure(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    if isinstance(exc, PermissionRefused):
        return failure_of_error(exc.error)
    if isinstance(exc, ResourceExhaustedError):
        return Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
    if isinstance(exc, Unserved):
        return Failure(grpc.StatusCode.UNIMPLEMENTED, unimplemented_message(exc.method))
    return Failure(grpc.StatusCode.INTERNAL, f"Internal error in the local training service: {exc!r}")


def failure_of_error(error: dict[str, Any]) -> Failure:
    """A REST ``error`` object (``code``, ``message``, ``status``, ``details``) as a status."""
    code = getattr(grpc.StatusCode, str(error.get("status") or "UNKNOWN"), grpc.StatusCode.UNKNOWN)
    return Failure(code, str(error.get("message", "")), tuple(error.get("details") or ()))


def unimplemented(method: str) -> Failure:
    """Google's words for a method it has but does not serve, naming the method."""
    message = f"{UNIMPLEMENTED_MESSAGE} The local training service (aip-local) does not serve {method}."
    return Failure(grpc.StatusCode.UNIMPLEMENTED, message)
