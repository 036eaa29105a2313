"""``aip-local serve``'s capacity flags: what the local region lacks from the start (:mod:`.capacity`).

Each can also be changed while the service runs, at ``POST /_capacity`` (with ``--fault-admin``, or
``--capacity-admin`` from loopback; :mod:`.capacity_admin`). A malformed value stops the service at
start with the rule it broke.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.capacity import QUOTA_MODES, CapacitySettings
from airflow_aip.local.capacity_admin import (
    parse_create_429,
    parse_quota,
    parse_seconds,
    parse_stockout,
    settings_from_flags,
)


def flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` that shows our rule, not argparse's "invalid value"."""

    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(exc.rule) from None

    return read


def add_capacity_arguments(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group(
        "capacity", "what the local region lacks (GET/POST /_capacity at run time)"
    )
    group.add_argument(
        "--quota",
        action="append",
        default=[],
        type=flag_type(parse_quota),
        metavar="REGION:METRIC=N",
        help="a limit per project, e.g. us-central1:custom_model_training_nvidia_t4_gpus=0 (repeatable)",
    )
    group.add_argument(
        "--quota-mode",
        choices=QUOTA_MODES,
        default="queue",
        help="queue (default): a job over quota waits QUEUED; reject: 429 at create past a limit",
    )
    group.add_argument(
        "--stockout",
        action="append",
        default=[],
        type=flag_type(parse_stockout),
        metavar="REGION:TYPE|RESERVATION|STRATEGY",
        help="the region is out of an accelerator or machine type (us-central1:NVIDIA_TESLA_A100), "
        "of a scheduling strategy's VMs (us-central1:SPOT), "
        "or a reservation is fully used (us-central1:my-reservation)",
    )
    group.add_argument(
        "--flex-start-capacity-after",
        default=0.0,
        type=flag_type(lambda text: parse_seconds(text, "--flex-start-capacity-after")),
        metavar="SECONDS|never",
        help="FLEX_START jobs wait this long in PENDING for capacity (default 0)",
    )
    group.add_argument(
        "--preempt-spot-after",
        default=None,
        type=flag_type(lambda text: parse_seconds(text, "--preempt-spot-after")),
        metavar="SECONDS",
        help="reclaim each SPOT CustomJob's VMs this long into its first attempt (it restarts)",
    )
    group.add_argument(
        "--create-429",
        action="append",
        default=[],
        type=flag_type(parse_create_429),
        metavar="rate[:N]|quota[:N]",
        help="the next N creates get 429 RESOURCE_EXHAUSTED, for the request rate or for quota",
    )


def capacity_settings(args: argparse.Namespace) -> CapacitySettings:
    return settings_from_flags(
        args.quota,
        args.quota_mode,
        args.stockout,
        args.flex_start_capacity_after,
        args.preempt_spot_after,
        args.create_429,
    )
