"""Moving a champion alias past the gate, or back: the ledger's compare-and-swap, then the alias.

The rules are :mod:`airflow_aip.registry.champion`'s (the gate, which is
:func:`airflow_aip.registry.gate.judge` as for the Cloud Storage store; the ledger's content; why
a ledger at all); this carries them out through the two hooks, and nothing else decides. A
refusal (a champion without a metric, another metric tag or goal) promotes nothing and fails
nothing: the outcome's reason says how to move the alias by hand.

A promotion:

1. reads the ledger (and its generation) and the version holding the alias (and its manifest);
2. judges the candidate against both the alias holder and the ledger's head, when they differ
   (a promotion that committed but has not moved the alias yet is the champion to beat);
3. commits a new ledger with ``ifGenerationMatch``; a 412 means another promotion or rollback
   committed first: judge again, against it;
4. merges the alias onto the candidate, then follows the ledger: if its head is no longer the
   candidate (a later commit whose merge may have landed before ours), the alias goes to the head.

A retry finds its own commit in the ledger and only completes the merge.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from airflow_aip.exceptions import AipError, PreconditionFailedError
from airflow_aip.export import MANIFEST_NAME
from airflow_aip.hooks.registry import ModelRegistryHook
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.jobs.vertex.models import ModelRef
from airflow_aip.registry.champion import (
    Contender,
    after_promotion,
    after_rollback,
    check_ledger,
    judge_version,
    ledger_head,
)
from airflow_aip.registry.gate import Measurement, Standing, Verdict
from airflow_aip.registry.upload import version_source
from airflow_aip.stored_manifest import StoredManifest

COMMIT_TRIES = 5  # commits lost to other promoters before this one gives up, and says so
FOLLOW_TRIES = 3


@dataclass(frozen=True)
class Outcome:
    """What a promotion or rollback did: the verdict, and the champions before and after."""

    moved: bool
    reason: str
    before: Contender | None
    after: Contender | None
    compared: Standing | None = None
    """The champion as the gate read it: re-measured on this run's data, when it was."""
    same_data: bool | None = None


class ChampionKeeper:
    """One model's champion alias and its ledger, read and moved through the hooks."""

    def __init__(
        self,
        registry: ModelRegistryHook,
        storage: StorageHook,
        model: ModelRef,
        alias: str,
        ledger_uri: str,
        log: Any,
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.model = model
        self.alias = alias
        self.ledger_uri = ledger_uri
        self.log = log

    def contender(self, version: Mapping[str, Any]) -> Contender:
        """A registered version and the metric of its export manifest (None when it has none)."""
        version_id = str(version.get("versionId"))
        artifact = str(version.get("artifactUri") or "").rstrip("/")
        manifest_uri = f"{artifact}/{MANIFEST_NAME}" if artifact.startswith("gs://") else None
        stored = self.storage.read_manifest(manifest_uri) if manifest_uri else None
        if stored is None:
            return Contender(version_id, None, None, None, manifest_uri)
        source = version_source(stored.content, str(manifest_uri))
        return Contender(
            version_id,
            source.metric,
            source.metric_tag,
            source.goal,
            manifest_uri,
            source.job_id,
            source.eval_data,
        )

    def holder(self) -> Contender | None:
        """The version holding the alias now, or None."""
        version = self.registry.get_model(self.model.at(self.alias).versioned)
        return self.contender(version) if version else None

    def promote(
        self,
        candidate: Contender,
        *,
        at: str,
        run: Mapping[str, Any],
        measurement: Measurement | None = None,
        require_same_eval_data: bool = False,
    ) -> Outcome:
        """Judge ``candidate`` (against ``measurement``'s score of the champion, when it scored it)."""
        gate = partial(
            judge_version,
            alias=self.alias,
            ledger_uri=self.ledger_uri,
            measurement=measurement,
            require_same_eval_data=require_same_eval_data,
        )
        for _ in range(COMMIT_TRIES):
            stored = self.storage.read_manifest(self.ledger_uri)
            ledger = stored.content if stored else None
            check_ledger(ledger, self.model.name)
            head, holder = ledger_head(ledger), self.holder()
            if head is not None and head.version_id == candidate.version_id:
                self._merge(candidate.version_id)  # our commit, from an earlier try: finish it
                self._follow_ledger()
                return Outcome(True, "committed by an earlier try; the alias follows", holder, candidate)
            champion = head or holder
            verdict = _judge(gate, candidate, head, holder)
            compared = champion.standing().measured(measurement) if champion else None
            if not verdict.promote:
                return Outcome(False, verdict.reason, champion, champion, compared, verdict.same_data)
            new = after_promotion(
                ledger,
                model=self.model.name,
                alias=self.alias,
                candidate=candidate,
                displaced=champion,
                at=at,
                run=run,
            )
            if not self._commit(stored, new):
                continue
            self._merge(candidate.version_id)
            self._follow_ledger()
            return Outcome(True, verdict.reason, champion, candidate, compared, verdict.same_data)
        raise AipError(f"{COMMIT_TRIES} other promotions of {self.model.name} committed first: try again")

    def rollback(self, *, at: str, run: Mapping[str, Any]) -> Outcome:
        for _ in range(COMMIT_TRIES):
            stored = self.storage.read_manifest(self.ledger_uri)
            new, restored, removed = after_rollback(
                stored.content if stored else None, model=self.model.name, alias=self.alias, at=at, run=run
            )
            if not self._commit(stored, new):
                continue
            self._merge(restored.version_id)
            self._follow_ledger()
            reason = f"rolled back from {removed.describe()} to {restored.describe()}"
            return Outcome(True, reason, removed, restored)
        raise AipError(f"{COMMIT_TRIES} other promotions of {self.model.name} committed first: try again")

    # -- steps -----------------------------------------------------------------------------------

    def _commit(self, stored: StoredManifest | None, ledger: Mapping[str, Any]) -> bool:
        """Write the ledger over the generation read; False when another commit came first."""
        data = json.dumps(ledger, indent=2, sort_keys=True).encode()
        try:
            self.storage.write_bytes(
                self.ledger_uri,
                data,
                if_generation_match=stored.generation if stored else 0,
                content_type="application/json",
            )
        except PreconditionFailedError:
            self.log.info("Another promotion of %s committed first: judging again", self.model.name)
            return False
        return True

    def _merge(self, version_id: str) -> None:
        self.registry.merge_aliases(self.model.at(version_id).versioned, [self.alias])
        self.log.info("Alias %s is on %s", self.alias, self.model.at(version_id).versioned)

    def _follow_ledger(self) -> None:
        """Put the alias where the ledger's head says, if a later commit moved the head."""
        for _ in range(FOLLOW_TRIES):
            stored = self.storage.read_manifest(self.ledger_uri)
            head = ledger_head(stored.content if stored else None)
            holding = self.registry.get_model(self.model.at(self.alias).versioned)
            if head is None or (holding and str(holding.get("versionId")) == head.version_id):
                return
            self.log.warning(
                "The ledger's champion is now version %s (a later commit): moving %s to it",
                head.version_id,
                self.alias,
            )
            self._merge(head.version_id)


def _judge(
    gate: Callable[[Contender, Contender | None], Verdict],
    candidate: Contender,
    head: Contender | None,
    holder: Contender | None,
) -> Verdict:
    """Beat the alias holder and, when it differs, the ledger's head (committed, not yet merged)."""
    verdict = gate(candidate, holder)
    if verdict.promote and head is not None and (holder is None or head.version_id != holder.version_id):
        return gate(candidate, head)
    return verdict
