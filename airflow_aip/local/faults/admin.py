"""``/_stats`` and ``/_faults``: what a test reads (counters, live rules) and how it aims faults.

Reading is always allowed while faults are on; adding or clearing rules only with
``--fault-admin``, so a service started with a fault rate alone cannot be steered remotely.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.faults.asgi import Receive, Send, read_body, send_error, send_json
from airflow_aip.local.faults.plan import FaultPlan
from airflow_aip.local.faults.rules import parse_rule

ADMIN_PATHS = ("/_faults", "/_stats")


async def serve_admin(
    plan: FaultPlan, verb: str, path: str, receive: Receive, send: Send, *, admin: bool, query: str = ""
) -> None:
    """Answer one request to :data:`ADMIN_PATHS` (``GET /_stats?project=P``: P's requests alone)."""
    if path == "/_stats" and verb == "GET":
        project = parse_qs(query).get("project", [None])[-1]
        await send_json(send, 200, plan.stats(project))
        return
    if path == "/_faults" and verb == "GET":
        await send_json(send, 200, {"rules": plan.rules()})
        return
    if path == "/_faults" and verb in ("POST", "DELETE"):
        if not admin:
            await send_error(send, 403, "fault admin is off: start aip-local serve with --fault-admin")
            return
        if verb == "DELETE":
            plan.clear()
        else:
            try:
                body = json.loads(await read_body(receive) or b"{}")
                listed = body.get("rules", [body]) if isinstance(body, dict) else body
                if not isinstance(listed, list):
                    raise ValidationError("rules", "must be a list of rules")
                rules = [parse_rule(item) for item in listed]
            except ValueError as exc:  # ValidationError is a ValueError too
                await send_error(send, 400, str(exc))
                return
            plan.add(rules)
        await send_json(send, 200, {"rules": plan.rules()})
        return
    await send_error(send, 405, f"{verb} {path} is not supported")
