"""A replica's distributed-training variables, as Google's pages and public trainers show them."""

from __future__ import annotations

import json
from collections.abc import Mapping

from airflow_aip.local.executor.cluster_env import ClusterLayout
from airflow_aip.local.executor.plans import PoolPlan, ml_plan

_RENDEZVOUS = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}


def _pool(index: int, count: int) -> PoolPlan:
    role = ("chief", "worker", "ps", "evaluator")[index]
    return PoolPlan(f"workerpool{index}", role, f"workerpool{index}-", count, "t")


def _layout(*pools: PoolPlan, tf_config_always: bool = False) -> ClusterLayout:
    hosts = {
        p.cluster_key: [f"127.0.0.1:{7000 + 10 * n + i}" for i in range(p.count)] for n, p in enumerate(pools)
    }
    return ClusterLayout(pools, hosts, {"k": 1}, tf_config_always)


def _lightning_picks_kubeflow(env: Mapping[str, str]) -> bool:
    """PyTorch Lightning's ``KubeflowEnvironment.detect()`` before 2.1 (Lightning-AI/pytorch-lightning
    ``kubeflow.py``; #18137 made 2.1 never detect it)."""
    required = {"KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
    excluded = {"GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}
    return required <= set(env) and excluded.isdisjoint(env)


def test_a_single_replica_vertex_job_gets_cluster_spec_but_no_tf_config_nor_rendezvous() -> None:
    primary = _pool(0, 1)
    env = _layout(primary).variables(primary, 0, "3")
    assert json.loads(env["CLUSTER_SPEC"])["task"] == {"type": "workerpool0", "index": 0, "trial": "3"}
    assert "TF_CONFIG" not in env  # "does not set TF_CONFIG for single-replica training jobs"
    assert not _RENDEZVOUS & set(env)  # GiGL: "VAI does not automatically set this for single-replica jobs"
    assert not _lightning_picks_kubeflow(env)


def test_ai_platform_set_tf_config_on_every_job() -> None:
    plan = ml_plan("p", {"jobId": "j", "trainingInput": {"pythonModule": "t", "packageUris": ["gs://b/p"]}})
    master = plan.pools[0]
    env = _layout(master, tf_config_always=plan.tf_config_always).variables(master, 0, None)
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "master", "index": 0}
    assert not _RENDEZVOUS & set(env)


def test_world_size_counts_the_primary_and_workers_only_and_each_node_has_its_own_rank() -> None:
    pools = (_pool(0, 1), _pool(1, 2), _pool(2, 1), _pool(3, 1))
    layout = _layout(*pools)
    envs = {p.task_name(i): layout.variables(p, i, None) for p in pools for i in range(p.count)}
    nodes = [envs[name] for name in ("workerpool0-0", "workerpool1-0", "workerpool1-1")]
    assert [(e["RANK"], e["WORLD_SIZE"]) for e in nodes] == [("0", "3"), ("1", "3"), ("2", "3")]
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in nodes} == {("127.0.0.1", "7000")}
    for other in ("workerpool2-0", "workerpool3-0"):  # parameter server (or Reduction Server), evaluator
        assert not _RENDEZVOUS & set(envs[other])
    tf_config = json.loads(envs["workerpool3-0"]["TF_CONFIG"])
    assert sorted(tf_config["cluster"]) == ["chief", "ps", "worker"]  # never the evaluator
    assert tf_config["task"] == {"type": "evaluator", "index": 0}
    # Lightning before 2.1 picks its Kubeflow environment on every node, as on Vertex AI, so its
    # node_rank is RANK: no two nodes share one.
    assert all(_lightning_picks_kubeflow(e) for e in nodes)


def test_a_primary_with_a_parameter_server_is_distributed_with_a_world_of_one() -> None:
    pools = (_pool(0, 1), _pool(2, 1))
    env = _layout(*pools).variables(pools[0], 0, None)
    assert "TF_CONFIG" in env
    assert (env["WORLD_SIZE"], env["RANK"]) == ("1", "0")
