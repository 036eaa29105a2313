"""The distributed-training variables of one replica, as Vertex AI and AI Platform set them: one place.

Process replicas and container replicas alike get these (:mod:`.runner` passes a container the
same names). The rules, with their sources:

- ``CLUSTER_SPEC`` on every replica of every job, single-replica ones too: "Vertex AI populates an
  environment variable, ``CLUSTER_SPEC``, on every replica" [P Vertex AI, Distributed training,
  "Environment variables for your cluster"].
- ``TF_CONFIG`` on every replica of a *distributed* job only: Vertex AI "sets the ``TF_CONFIG``
  environment variable on each replica of all distributed training jobs" and "does not set
  ``TF_CONFIG`` for single-replica training jobs" [P same page, "The format of TF_CONFIG"].
  AI Platform (ml v1) set it "on every VM of every training job" [P AI Platform, TF_CONFIG and
  distributed training]: :attr:`.plans.ExecutionPlan.tf_config_always`. Its cluster never lists
  evaluators [P both pages].
- PyTorch's rendezvous ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``: not on a
  single-replica job ("VAI does not automatically set this for single-replica jobs" [O
  Snapchat/GiGL ``vertex_ai_context.py``]). On a distributed one, the PyTorch-style nodes are the
  primary and the workers (pools 0 and 1): ``WORLD_SIZE`` is their number ("the number of
  nodes" [O cellarium-ai/cellarium-ml#56]; AI Platform: "the total number of nodes in the
  cluster" [P AI Platform, Configuring distributed training for PyTorch]) and ``RANK`` is 0 on the
  primary and 1.. on the workers in order, unique per node [P the same AI Platform page]. Pool 2
  holds parameter servers or Vertex's Reduction Server, which is no member of the NCCL world
  [P Vertex AI, Distributed training, "Reduction Server"], and pool 3 evaluators: they are not
  counted, and they get none of the four. [U] unverified: whether Vertex AI gives pools 2 and 3
  any of them, and its ``MASTER_PORT`` (2222 in its host names; here the primary's port in the
  cluster map).
- ``KUBERNETES_PORT`` on every replica: a Vertex replica runs in a Kubernetes pod, where
  PyTorch Lightning before 2.1 detects its ``KubeflowEnvironment`` (``detect()`` wants
  ``KUBERNETES_PORT``, ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``, and none of
  torchelastic's ``GROUP_RANK``/``LOCAL_WORLD_SIZE``: Lightning-AI/pytorch-lightning's
  ``kubeflow.py`` before #18137, which made 2.1 never detect it) [O cellarium-ai/cellarium-ml#56:
  Lightning picks Kubeflow on Vertex AI], so each node's ``node_rank`` is its ``RANK``. Lightning
  2.1 and later pick ``LightningEnvironment`` on both, as on Vertex. [U] its value there (a pod's
  ``tcp://<service IP>:443``): here one where nothing listens, so no Kubernetes client gets far.
  ``KUBERNETES_SERVICE_HOST``/``_PORT`` are not set: no detection reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_aip.local.executor.plans import PoolPlan

# TF_CONFIG's keys of the PyTorch-style nodes: the primary (chief, or ml v1's master) and workers.
_NODE_ROLES = frozenset({"chief", "master", "worker"})
KUBERNETES_PORT = "tcp://127.0.0.1:9"  # discard: closed on loopback


@dataclass(frozen=True)
class ClusterLayout:
    """Every replica's address (``hosts``: cluster key -> ``host:port`` per replica) and the job's shape."""

    pools: tuple[PoolPlan, ...]
    hosts: Mapping[str, Sequence[str]]
    job: Mapping[str, Any]  # CLUSTER_SPEC's and TF_CONFIG's "job"
    tf_config_always: bool = False  # ml v1: TF_CONFIG on single-replica jobs too

    @property
    def distributed(self) -> bool:
        """More than one replica in all: what TF_CONFIG and the rendezvous variables wait for."""
        return sum(p.count for p in self.pools) > 1

    def nodes(self) -> list[tuple[str, int]]:
        """The PyTorch-style nodes in rank order: (cluster key, index) of the primary, then workers."""
        return [(p.cluster_key, i) for p in self.pools if p.tf_key in _NODE_ROLES for i in range(p.count)]

    def variables(self, pool: PoolPlan, index: int, trial_id: str | None) -> dict[str, str]:
        """What one replica (``pool``'s ``index``-th) gets of the cluster's variables."""
        task: dict[str, Any] = {"type": pool.cluster_key, "index": index}
        if trial_id:
            task["trial"] = trial_id
        cluster = {p.cluster_key: list(self.hosts[p.cluster_key]) for p in self.pools if p.in_cluster}
        spec = {"cluster": cluster, "task": task, "job": self.job, "environment": "cloud"}
        env = {"CLUSTER_SPEC": json.dumps(spec), "KUBERNETES_PORT": KUBERNETES_PORT}
        if self.distributed or self.tf_config_always:
            # TensorFlow's cluster never lists evaluators; they read TF_CONFIG's task only.
            members = [p for p in self.pools if p.tf_key != "evaluator"]
            tf_cluster = {p.tf_key: list(self.hosts[p.cluster_key]) for p in members}
            tf_task = dict(task, type=pool.tf_key)
            env["TF_CONFIG"] = json.dumps(
                {"cluster": tf_cluster, "task": tf_task, "job": self.job, "environment": "cloud"}
            )
        nodes = self.nodes()
        if self.distributed and (pool.cluster_key, index) in nodes:
            address, _, port = self.hosts[self.pools[0].cluster_key][0].rpartition(":")
            env.update(
                MASTER_ADDR=address,
                MASTER_PORT=port,
                WORLD_SIZE=str(len(nodes)),
                RANK=str(nodes.index((pool.cluster_key, index))),
            )
        return env
