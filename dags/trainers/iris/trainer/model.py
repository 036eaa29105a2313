"""The model: standardised features into a multinomial logistic regression.

Two hyperparameters visibly change the eval accuracy on iris, so a tuning job has something to
find: ``C`` (inverse regularisation strength; tiny values underfit) and ``max_iter`` (a handful
of solver iterations stops short of the optimum). Only arguments stable across scikit-learn
releases are used, so the package runs on older training runtimes too.
"""

from __future__ import annotations

import warnings
from typing import Any


def build(c: float, max_iter: int, seed: int = 0) -> Any:
    """An unfitted pipeline; raises ValueError for hyperparameters outside their domain."""
    if not c > 0:
        raise ValueError(f"C must be > 0, got {c!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter, random_state=seed))


def train(pipeline: Any, features: Any, labels: Any) -> Any:
    """Fit in place and return the pipeline.

    A small ``max_iter`` is a legitimate trial, so scikit-learn's convergence warning is silenced
    rather than repeated in every trial's log.
    """
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipeline.fit(features, labels)
    return pipeline


def accuracy(pipeline: Any, features: Any, labels: Any) -> float:
    return float(pipeline.score(features, labels))


def iterations(pipeline: Any) -> int:
    """Solver iterations actually run: the ``global_step`` reported to hypertune."""
    return int(max(pipeline[-1].n_iter_))
