"""The example trainer (dags/trainers/iris) as a training job runs it: built as an sdist, installed
with pip, started as ``python -m trainer.task`` against fake-gcs-server.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
TRAINER_SRC = DAGS / "trainers" / "iris"


def _load_util() -> ModuleType:
    """trainer/util.py from the source tree, without putting a top-level ``trainer`` on sys.path."""
    spec = importlib.util.spec_from_file_location("iris_trainer_util", TRAINER_SRC / "trainer" / "util.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


util = _load_util()


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trainer's sdist, built offline from a copy so the source tree gains no build output."""
    work = tmp_path_factory.mktemp("trainer-build")
    src = work / "src"
    shutil.copytree(TRAINER_SRC, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(work / "dist"), src],
        check=True,
        capture_output=True,
    )
    (archive,) = (work / "dist").glob("*.tar.gz")
    return archive


@pytest.fixture(scope="module")
def installed(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist installed as a training job installs it: pip, no index, dependencies already present."""
    target = tmp_path_factory.mktemp("trainer-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(sdist),
        ],
        check=True,
        capture_output=True,
    )
    return target


def run_trainer(installed: Path, cwd: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m trainer.task`` from the installed package only (cwd is not the source tree)."""
    full_env = {**os.environ, "PYTHONPATH": str(installed), **env}
    for name in ("CLOUD_ML_TRIAL_ID", "TF_CONFIG", "AIP_MODEL_DIR"):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )


def metric_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def data_uris(bucket: Any) -> tuple[str, str]:
    train, evaluation = util.load_split(seed=7, eval_fraction=0.25)
    return (
        util.write_csv(train, f"gs://{bucket.name}/data/train.csv"),
        util.write_csv(evaluation, f"gs://{bucket.name}/data/eval.csv"),
    )


def test_sdist_has_the_recommended_layout(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    expected = {"setup.py", "trainer/__init__.py", "trainer/task.py", "trainer/model.py", "trainer/util.py"}
    assert expected <= names


def test_trains_from_gcs_and_reports_the_metric(
    installed: Path, data_uris: tuple[str, str], bucket: Any, tmp_path: Path
) -> None:
    import joblib

    metric_file = tmp_path / "hypertune" / "metrics.jsonl"
    train_uri, eval_uri = data_uris
    job_dir = f"gs://{bucket.name}/jobs/run1"
    result = run_trainer(
        installed,
        tmp_path,
        ["--job-dir", job_dir, "--train-data", train_uri, "--eval-data", eval_uri, "--C=10", "--max-iter=20"],
        CLOUD_ML_HP_METRIC_FILE=str(metric_file),
    )
    assert result.returncode == 0, result.stderr

    metrics = json.loads(bucket.blob("jobs/run1/metrics.json").download_as_bytes())
    assert metrics["metric_tag"] == "accuracy"
    assert 0.8 <= metrics["accuracy"] <= 1.0
    assert metrics["hyperparameters"] == {"C": 10.0, "max_iter": 20, "seed": 0}
    assert metrics["trial_id"] is None
    assert (metrics["train_examples"], metrics["eval_examples"]) == (112, 38)
    assert metrics["model_uri"] == f"{job_dir}/model.joblib"
    eval_md5 = hashlib.md5(bucket.blob("data/eval.csv").download_as_bytes()).hexdigest()
    assert metrics["eval_data"] == {"uri": eval_uri, "md5": eval_md5}  # what the metric was measured on

    model_path = tmp_path / "model.joblib"
    model_path.write_bytes(bucket.blob("jobs/run1/model.joblib").download_as_bytes())
    model = joblib.load(model_path)
    x_eval, y_eval = util.read_csv(eval_uri)
    assert model.score(x_eval, y_eval) == pytest.approx(metrics["accuracy"])
    assert set(model.predict(x_eval)) <= {0, 1, 2}

    (line,) = metric_lines(metric_file)
    assert float(line["accuracy"]) == pytest.approx(metrics["accuracy"])
    assert int(line["global_step"]) == metrics["global_step"] >= 1


def test_tuning_trial_writes_under_its_trial_id_with_the_spec_tag(
    installed: Path, data_uris: tuple[str, str], bucket: Any, tmp_path: Path
) -> None:
    metric_file = tmp_path / "trial3.metrics"
    train_uri, eval_uri = data_uris
    result = run_trainer(
        installed,
        tmp_path,
        [
            f"--job-dir=gs://{bucket.name}/tuning",
            f"--train-data={train_uri}",
            f"--eval-data={eval_uri}",
            "--max_iter=50",
            "--c=0.5",
            "--metric-tag=training/hptuning/metric",
        ],
        CLOUD_ML_HP_METRIC_FILE=str(metric_file),
        CLOUD_ML_TRIAL_ID="3",
    )
    assert result.returncode == 0, result.stderr

    names = {blob.name for blob in bucket.list_blobs(prefix="tuning/")}
    assert names == {"tuning/3/model.joblib", "tuning/3/metrics.json"}
    metrics = json.loads(bucket.blob("tuning/3/metrics.json").download_as_bytes())
    assert metrics["trial_id"] == "3"
    assert metrics["hyperparameters"]["C"] == 0.5
    (line,) = metric_lines(metric_file)
    assert line["trial"] == "3"
    assert 0.0 <= float(line["training/hptuning/metric"]) <= 1.0
    assert float(line["training/hptuning/metric"]) == pytest.approx(metrics["metric_value"])


def test_hyperparameters_change_the_metric(installed: Path, tmp_path: Path) -> None:
    """Local paths work too, and tuning has something to find: heavy regularisation underfits."""
    train, evaluation = util.load_split(seed=0, eval_fraction=0.3)
    train_path = util.write_csv(train, str(tmp_path / "data" / "train.csv"))
    eval_path = util.write_csv(evaluation, str(tmp_path / "data" / "eval.csv"))
    scores = {}
    runs = {"underfit": ["--C=0.0001", "--max-iter=2"], "fit": ["--C=10", "--max-iter=100"]}
    for name, hyper in runs.items():
        out = tmp_path / name
        result = run_trainer(
            installed,
            tmp_path,
            ["--job-dir", str(out), "--train-data", train_path, "--eval-data", eval_path, *hyper],
            CLOUD_ML_HP_METRIC_FILE=str(tmp_path / f"{name}.metrics"),
        )
        assert result.returncode == 0, result.stderr
        assert (out / "model.joblib").is_file()
        scores[name] = json.loads((out / "metrics.json").read_text())["accuracy"]
    assert scores["fit"] - scores["underfit"] >= 0.1


def test_evaluate_model_scores_a_saved_model_on_other_data(installed: Path, tmp_path: Path) -> None:
    """``--evaluate-model``: a champion scored on a new split, with the split's md5, and nothing trained."""
    import joblib

    train, evaluation = util.load_split(seed=1, eval_fraction=0.3)
    train_path = util.write_csv(train, str(tmp_path / "old" / "train.csv"))
    old_eval = util.write_csv(evaluation, str(tmp_path / "old" / "eval.csv"))
    champion = tmp_path / "champion"
    args = ["--job-dir", str(champion), "--train-data", train_path, "--eval-data", old_eval]
    trained = run_trainer(installed, tmp_path, args, CLOUD_ML_HP_METRIC_FILE=str(tmp_path / "hp"))
    assert trained.returncode == 0, trained.stderr
    recorded = json.loads((champion / "metrics.json").read_text())
    old_md5 = hashlib.md5(Path(old_eval).read_bytes()).hexdigest()
    assert recorded["eval_data"] == {"uri": old_eval, "md5": old_md5}

    _, new_rows = util.load_split(seed=2, eval_fraction=0.3)
    new_eval = util.write_csv(new_rows, str(tmp_path / "new" / "eval.csv"))
    out = tmp_path / "evaluation" / "champion_metrics.json"
    evaluated = run_trainer(
        installed,
        tmp_path,
        ["--evaluate-model", str(champion), "--eval-data", new_eval, "--metrics-uri", str(out)],
    )
    assert evaluated.returncode == 0, evaluated.stderr
    metrics = json.loads(out.read_text())
    x_eval, y_eval = util.read_csv(new_eval)
    score = joblib.load(champion / "model.joblib").score(x_eval, y_eval)
    assert metrics["accuracy"] == metrics["metric_value"] == pytest.approx(score)
    assert metrics["evaluated_model_uri"] == str(champion)
    assert metrics["eval_data"]["md5"] == hashlib.md5(Path(new_eval).read_bytes()).hexdigest() != old_md5
    assert sorted(p.name for p in out.parent.iterdir()) == ["champion_metrics.json"]  # no model saved

    # An ml v1 job's export keeps the model in its model/ folder: found there too.
    nested = tmp_path / "ml_v1_export"
    (nested / "model").mkdir(parents=True)
    (nested / "model" / "model.joblib").write_bytes((champion / "model.joblib").read_bytes())
    again = tmp_path / "again.json"
    args = ["--evaluate-model", str(nested), "--eval-data", new_eval, "--metrics-uri", str(again)]
    assert run_trainer(installed, tmp_path, args).returncode == 0
    assert json.loads(again.read_text())["accuracy"] == metrics["accuracy"]


def test_bad_hyperparameter_fails_before_writing(installed: Path, tmp_path: Path) -> None:
    train, evaluation = util.load_split()
    train_path = util.write_csv(train, str(tmp_path / "train.csv"))
    eval_path = util.write_csv(evaluation, str(tmp_path / "eval.csv"))
    out = tmp_path / "out"
    result = run_trainer(
        installed,
        tmp_path,
        ["--job-dir", str(out), "--train-data", train_path, "--eval-data", eval_path, "--C=0"],
        CLOUD_ML_HP_METRIC_FILE=str(tmp_path / "m"),
    )
    assert result.returncode != 0
    assert "C must be > 0" in result.stderr
    assert not out.exists()


def test_trial_id_from_tf_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUD_ML_TRIAL_ID", raising=False)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"task": {"type": "master", "index": 0, "trial": "12"}}))
    assert util.output_dir("gs://b/job/") == "gs://b/job/12"
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "4")
    assert util.output_dir("gs://b/job") == "gs://b/job/4"
    monkeypatch.delenv("CLOUD_ML_TRIAL_ID")
    monkeypatch.delenv("TF_CONFIG")
    assert util.output_dir("/tmp/job") == "/tmp/job"


def test_split_is_deterministic_and_stratified() -> None:
    first = util.load_split(seed=5, eval_fraction=0.2)
    assert util.load_split(seed=5, eval_fraction=0.2) == first
    assert util.load_split(seed=6, eval_fraction=0.2) != first
    train, evaluation = first
    assert (len(train), len(evaluation)) == (120, 30)
    assert sorted(row[-1] for row in evaluation) == [0] * 10 + [1] * 10 + [2] * 10
    with pytest.raises(ValueError, match="eval_fraction"):
        util.load_split(eval_fraction=1.0)


def test_csv_round_trip_through_gcs(bucket: Any) -> None:
    train, _ = util.load_split(seed=1)
    uri = util.write_csv(train, f"gs://{bucket.name}/rt/train.csv")
    features, labels = util.read_csv(uri)
    assert features.shape == (120, 4)
    assert features.tolist() == [row[:-1] for row in train]
    assert labels.tolist() == [row[-1] for row in train]
    assert bucket.blob("rt/train.csv").download_as_bytes().startswith(b"sepal_length_cm,")


def test_airflowignore_keeps_the_trainer_out_of_dag_parsing(tmp_path: Path) -> None:
    from airflow._shared.module_loading.file_discovery import find_path_from_directory

    control = tmp_path / "dags"
    shutil.copytree(TRAINER_SRC, control / "trainers" / "iris")
    for syntax in ("glob", "regexp"):
        # Without the ignore file the trainer's modules would be candidates for parsing...
        assert any("trainers" in p for p in find_path_from_directory(control, ".airflowignore", syntax))
        # ...and with it, none is.
        shutil.copy(DAGS / ".airflowignore", control / ".airflowignore")
        assert not [p for p in find_path_from_directory(control, ".airflowignore", syntax) if "trainers" in p]
        assert not [p for p in find_path_from_directory(DAGS, ".airflowignore", syntax) if "trainers" in p]
        (control / ".airflowignore").unlink()
