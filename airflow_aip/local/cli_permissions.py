"""``aip-local serve``'s permission flags: what the local project refuses from the start.

See :mod:`.permissions`. Each can also be changed while the service runs, at ``POST /_permissions``
(with ``--fault-admin``).
A malformed value stops the service at start with the rule it broke.
"""

from __future__ import annotations

import argparse

from airflow_aip.jobs.permissions import SERVICE_TITLES
from airflow_aip.local.cli_capacity import flag_type
from airflow_aip.local.permissions import (
    PermissionSettings,
    parse_api,
    parse_bucket,
    parse_service_account,
)


def add_permission_arguments(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group(
        "permissions", "what the local project refuses, as Google would (GET/POST /_permissions at run time)"
    )
    group.add_argument(
        "--disable-api",
        action="append",
        default=[],
        type=flag_type(parse_api),
        metavar="API",
        help=f"every call to this API answers 403 SERVICE_DISABLED ({', '.join(SERVICE_TITLES)}; repeatable)",
    )
    group.add_argument(
        "--deny-act-as",
        action="append",
        default=[],
        type=flag_type(parse_service_account),
        metavar="SA_EMAIL",
        help="a create naming this serviceAccount answers 403 for iam.serviceAccounts.actAs (repeatable)",
    )
    group.add_argument(
        "--unreadable-bucket",
        action="append",
        default=[],
        type=flag_type(parse_bucket),
        metavar="NAME",
        help="the service agent cannot read this bucket: a create whose packages are in it answers 400 "
        "FAILED_PRECONDITION (repeatable)",
    )


def permission_settings(args: argparse.Namespace) -> PermissionSettings:
    return PermissionSettings(
        frozenset(args.disable_api), frozenset(args.deny_act_as), frozenset(args.unreadable_bucket)
    )
