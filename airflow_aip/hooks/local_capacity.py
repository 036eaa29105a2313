"""Make a rung of a capacity ladder run out of capacity on purpose, on the local training service only.

A capacity ladder climbs only when Vertex AI has no capacity to give, which a user of ``make ui``
or ``make demo`` could never see happen. A Dag's local-only Param (``local_stockout`` in the
example pipeline) names the scheduling strategies whose VMs the region has none of for the run;
its task calls :func:`set_local_stockouts` before the ladder's first rung is created. It asks the
service the job hook reaches (the same endpoint and region), at ``POST /_capacity``, which the
service accepts from loopback when started with ``--capacity-admin`` (as ``make ui`` and ``make
demo`` start it). On Google nothing is sent: the request is refused, naming the Param, because
Google's capacity is not ours to change. An empty list restocks what an earlier run stocked out,
so the next run is not surprised by it; on Google an empty list is a no-op.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_aip.exceptions import ApiError, ValidationError
from airflow_aip.jobs.vertex.ladder import STRATEGIES
from airflow_aip.uris import is_loopback


def set_local_stockouts(
    strategies: Sequence[str],
    *,
    project_id: str,
    region: str,
    param: str = "local_stockout",
    gcp_conn_id: str = "google_cloud_default",
) -> list[str]:
    """Make ``region`` out of ``strategies``' VMs (and only those) on the local service; its stockouts after.

    Raises ValidationError naming ``param`` for an unknown strategy, or when the job hook reaches
    Google (or a service not on this machine) while ``strategies`` is not empty.
    """
    from airflow_aip.hooks.vertex import VertexJobHook

    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValidationError(param, f"must list strategies among {', '.join(STRATEGIES)}, got {unknown}")
    hook = VertexJobHook(gcp_conn_id=gcp_conn_id, project_id=project_id, region=region)
    endpoint = hook.endpoint
    if not (endpoint and is_loopback(endpoint)):
        if not strategies:
            return []
        where = f"at {endpoint}" if endpoint else "on Google Cloud"
        raise ValidationError(
            param,
            f"makes a rung run out of capacity on the local training service only (aip-local on this "
            f"machine); this task reaches Vertex AI {where}, whose capacity is not ours to change: "
            "leave it empty",
        )
    current = {str(s) for s in hook.request("capacity.get", "GET", "_capacity").get("stockouts") or []}
    wanted = {f"{region}:{s}" for s in strategies}
    unwanted = {f"{region}:{s}" for s in STRATEGIES} - wanted
    if wanted <= current and not unwanted & current:
        return sorted(current)
    # One step on the service: runs in other regions changing theirs meanwhile keep their own.
    body = {"stockoutsRemoved": sorted(unwanted), "stockoutsAdded": sorted(wanted)}
    try:
        answer = hook.request("capacity.update", "POST", "_capacity", body=body, retry=False)
    except ApiError as err:
        if err.status != 403:
            raise
        raise ValidationError(param, f"the local training service refused it: {err.message}") from None
    return [str(s) for s in answer.get("stockouts") or []]
