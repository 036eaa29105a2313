"""Fault injection for the local training service: the errors Google's APIs and networks produce.

Retraining pipelines run unattended, and Google answers 429 and 503, and connections drop. To
prove that no job is lost or created twice when that happens, ``aip-local serve --fault-rate
0.2`` makes a share of API calls fail, and ``--fault-admin`` lets a test aim faults at one method
(``POST /_faults``), for a number of calls or for a time (``for_seconds``: an outage). Every
fault comes either **before** the request reaches the service, or **after** the service applied
it (the job exists) while the client gets an error or no answer: the client cannot know which,
which is the point.

Kinds: ``429``, ``500``, ``503`` (Google-shaped error bodies), ``"drop"`` (the connection closes
without a byte of answer), ``"reset"`` (TCP reset), ``"delay"`` (the answer waits ``seconds``;
for killing a client between a create and its answer). ``GET /_stats`` counts requests, the
service's own answers (``created`` = creates it applied) and the faults injected.

The same middleware, with the same plan, wraps the proxy ``aip-local serve`` then puts in front
of fake-gcs-server (:mod:`airflow_aip.local.storage.gcs_proxy`): Cloud Storage calls (``storage.*``
methods) fail the same ways, and ``/_faults``/``/_stats`` on the ml port cover them too.

Nothing here is on unless ``aip-local serve`` was asked for it: without fault flags the
middleware is not installed at all (nor the proxy).

One concern per module: :mod:`.routes` names the API method a request calls; :mod:`.rules` what
a fault is and how a rule is read; :mod:`.plan` decides per request and counts; :mod:`.middleware`
applies the decision to the connection; :mod:`.admin` serves ``/_faults`` and ``/_stats``;
:mod:`.asgi` holds the raw ASGI types and answers they share.
"""

from __future__ import annotations

from airflow_aip.local.faults.asgi import ASGIApp, Message, Receive, Scope, Send
from airflow_aip.local.faults.middleware import ConnectionDropped, FaultInjection
from airflow_aip.local.faults.plan import FaultPlan
from airflow_aip.local.faults.routes import ANY_METHOD, CREATE_METHODS, METHODS, api_method
from airflow_aip.local.faults.rules import (
    CONNECTION_KINDS,
    ERROR_KINDS,
    KINDS,
    RANDOM_KINDS,
    WHEN,
    Fault,
    FaultRule,
    parse_rule,
)

__all__ = [
    "ANY_METHOD",
    "CONNECTION_KINDS",
    "CREATE_METHODS",
    "ERROR_KINDS",
    "KINDS",
    "METHODS",
    "RANDOM_KINDS",
    "WHEN",
    "ASGIApp",
    "ConnectionDropped",
    "Fault",
    "FaultInjection",
    "FaultPlan",
    "FaultRule",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "api_method",
    "parse_rule",
]
