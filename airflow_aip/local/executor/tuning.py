"""Hyperparameter search with optuna, shaped by an ml v1 ``HyperparameterSpec``.

``algorithm`` picks the sampler: GRID_SEARCH -> GridSampler, RANDOM_SEARCH -> RandomSampler,
ALGORITHM_UNSPECIFIED (Google's model-based default) -> TPESampler with the constant liar, so
parallel trials do not all explore the same point. ``scaleType`` maps onto the search:
UNIT_LOG_SCALE samples ``log=True``; UNIT_REVERSE_LOG_SCALE, which spreads values near the top
of the range, is approximated by sampling ``y`` on a log scale and trying ``min + max - y``.
``enableTrialEarlyStopping`` turns on a MedianPruner fed with the trial's intermediate
metric reports. A parameter with a ``parent`` (Vertex's conditional parameter specs, flattened by
:func:`airflow_aip.jobs.vertex.study.search_spec`) is suggested only when its parent's value is
one of ``parentValues``; optuna's define-by-run search space takes that as it comes.

Trials report through cloudml-hypertune: JSON lines in CLOUD_ML_HP_METRIC_FILE, each with the
metric under its tag (``hyperparameterMetricTag``, default ``training/hptuning/metric``) and a
``global_step``. The library rewrites the whole file on every report and keeps the last 100.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from airflow_aip.jobs.hyperparameters import LOG_SCALES
from airflow_aip.jobs.trials import Goal

MAX_GRID_POINTS = 100_000


@dataclass(frozen=True)
class MetricReport:
    """One line of the hypertune metric file, for our tag."""

    timestamp: float
    global_step: int
    value: float


def read_metric_reports(path: Path, tag: str) -> list[MetricReport]:
    """The reports for ``tag`` in the file, oldest first; a missing or torn file gives what it can."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    reports = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            if tag not in entry:
                continue
            value = float(entry[tag])
            step = int(float(entry.get("global_step", 0) or 0))
            stamp = float(entry.get("timestamp", 0.0) or 0.0)
        except (ValueError, TypeError, AttributeError):
            continue
        if math.isfinite(value):
            reports.append(MetricReport(stamp, step, value))
    return reports


def _format(value: Any, kind: str, discrete_as_float: bool = False) -> str:
    """How the value goes on the command line and into ``trials[].hyperparameters``.

    DISCRETE values: as floats on Vertex (``128.0``, the search spec's ``discreteFormat``); as
    AI Platform wrote them (``128``) on ml v1.
    """
    if kind == "INTEGER":
        return str(int(value))
    if kind == "DOUBLE" or (kind == "DISCRETE" and discrete_as_float):
        return repr(float(value))
    if isinstance(value, float) and value.is_integer() and kind == "DISCRETE":
        return str(int(value))
    return str(value)


def _grid_values(param: Mapping[str, Any]) -> list[Any]:
    kind = param["type"]
    if kind == "CATEGORICAL":
        return list(param["categoricalValues"])
    if kind == "DISCRETE":
        return list(param["discreteValues"])
    if kind == "INTEGER":
        return list(range(int(param["minValue"]), int(param["maxValue"]) + 1))
    raise ValueError(f"GRID_SEARCH cannot enumerate a {kind} parameter ({param['parameterName']})")


def _ask_tell_grid_sampler(grid: dict[str, list[Any]], seed: int) -> Any:
    """A GridSampler for ask/tell use.

    GridSampler calls ``study.stop()`` once the grid is used up, which only works inside
    ``study.optimize``; here the trial budget, capped at the grid size, ends the search instead.
    """
    import optuna

    class AskTellGridSampler(optuna.samplers.GridSampler):
        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            return None

    return AskTellGridSampler(grid, seed=seed)


def _study_keys(params: Sequence[Mapping[str, Any]]) -> list[str]:
    """The name optuna knows each parameter by: its own, or ``name#i`` where several share it.

    study.proto lets conditional parameters of one parent share an ID under disjoint parent values
    (``lr`` under ``optimizer=adam``, another ``lr`` under ``sgd``), each with its own type and
    range; an optuna study keeps one distribution per name, so each gets a name of its own there.
    At most one of them is chosen in a trial, and the trainer gets it under the shared ID.
    """
    counts = Counter(p["parameterName"] for p in params)
    return [
        p["parameterName"] if counts[p["parameterName"]] == 1 else f"{p['parameterName']}#{i}"
        for i, p in enumerate(params)
    ]


class HyperparameterSearch:
    """An optuna study driven by ask/tell; one ``optuna.Trial`` per service trial."""

    def __init__(self, spec: Mapping[str, Any], seed_text: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.params: Sequence[Mapping[str, Any]] = spec["params"]
        self.keys = _study_keys(self.params)
        self.goal = Goal.parse(spec.get("goal"))
        self.discrete_as_float = spec.get("discreteFormat") == "float"
        direction: Literal["minimize", "maximize"] = "minimize" if self.goal is Goal.MINIMIZE else "maximize"
        seed = int(hashlib.sha256(seed_text.encode()).hexdigest()[:8], 16)
        algorithm = spec.get("algorithm", "ALGORITHM_UNSPECIFIED")
        max_trials = int(spec.get("maxTrials", 1))
        sampler: Any
        if algorithm == "GRID_SEARCH":
            grid = {key: _grid_values(p) for key, p in zip(self.keys, self.params, strict=True)}
            size = math.prod(len(v) for v in grid.values())
            if size > MAX_GRID_POINTS:
                raise ValueError(f"the grid has {size} points; at most {MAX_GRID_POINTS} are searched")
            sampler = _ask_tell_grid_sampler(grid, seed)
            max_trials = min(max_trials, size)
        elif algorithm == "RANDOM_SEARCH":
            sampler = optuna.samplers.RandomSampler(seed=seed)
        else:
            sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True)
        self.max_trials = max_trials
        pruner: Any = optuna.pruners.NopPruner()
        if spec.get("enableTrialEarlyStopping"):
            pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
        self.study = optuna.create_study(direction=direction, sampler=sampler, pruner=pruner)
        self._trials: dict[str, Any] = {}
        self._steps: dict[str, int] = {}

    def ask(self, trial_id: str) -> dict[str, str]:
        """Start trial ``trial_id``: its hyperparameters, as the strings passed as ``--name=value``."""
        trial = self.study.ask()
        self._trials[trial_id] = trial
        self._steps[trial_id] = 0
        chosen: dict[str, Any] = {}
        kinds: dict[str, str] = {}
        for key, param in zip(self.keys, self.params, strict=True):
            parent = param.get("parent")
            # A conditional parameter (Vertex) is tried only when its parent took a listed value.
            if parent is not None and (parent not in chosen or chosen[parent] not in param["parentValues"]):
                continue
            chosen[param["parameterName"]] = self._suggest(trial, param, key)
            kinds[param["parameterName"]] = param["type"]
        return {name: _format(value, kinds[name], self.discrete_as_float) for name, value in chosen.items()}

    @staticmethod
    def _suggest(trial: Any, param: Mapping[str, Any], name: str) -> Any:
        kind, scale = param["type"], param.get("scaleType", "NONE")
        if kind == "CATEGORICAL":
            return trial.suggest_categorical(name, list(param["categoricalValues"]))
        if kind == "DISCRETE":
            return trial.suggest_categorical(name, list(param["discreteValues"]))
        low, high = param["minValue"], param["maxValue"]
        log = scale in LOG_SCALES
        if kind == "INTEGER":
            value: float = trial.suggest_int(name, int(low), int(high), log=log)
        else:
            value = trial.suggest_float(name, float(low), float(high), log=log)
        if scale == "UNIT_REVERSE_LOG_SCALE":
            value = low + high - value
        return value

    def report(self, trial_id: str, value: float) -> bool:
        """An intermediate metric of a running trial; True if the pruner says stop it early."""
        trial = self._trials[trial_id]
        step = self._steps[trial_id]
        self._steps[trial_id] = step + 1
        trial.report(value, step)
        return bool(trial.should_prune())

    def tell(self, trial_id: str, value: float | None, *, stopped_early: bool = False) -> None:
        """A finished trial: its final metric, or None if it failed or reported nothing."""
        import optuna

        trial = self._trials.pop(trial_id)
        if stopped_early:
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif value is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)
