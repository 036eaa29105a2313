"""OpenLineage datasets and facets built from the operators' results (``airflow_aip.lineage``).

The real thing (the provider's listener, its file transport, a whole retraining run) is in
tests/dags/test_lineage.py; here each rule is checked on sample results, and the provider's
absence on a worker is simulated.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from airflow_aip import lineage
from airflow_aip.lineage import (
    build_lineage,
    export_lineage,
    gcs_dataset_id,
    gcs_uris_in_args,
    register_lineage,
    stage_lineage,
    staged_sha256,
    submit_lineage,
    values_under,
)
from airflow_aip.lineage.facets import facet
from airflow_aip.operators import (
    BuildTrainerPackageOperator,
    ExportArtifactsOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)

SHA = "0123456789abcdef" * 4
BUILT: dict[str, Any] = {
    "path": "/tmp/aip-sdist-x/iris_trainer-0.1.0.tar.gz",
    "sha256": SHA,
    "name": "iris-trainer",
    "version": "0.1.0",
    "size": 5923,
    "source": "/dags/trainers/iris/trainer",
    "source_date_epoch": 946684800,
}
STAGED = f"gs://b/staging/{SHA}/iris_trainer-0.1.0.tar.gz"
STAGED_ID = ("gs://b", f"staging/{SHA}/iris_trainer-0.1.0.tar.gz")
ML_SUMMARY: dict[str, Any] = {
    "job_id": "iris_1",
    "state": "SUCCEEDED",
    "backend": "ai_platform",
    "name": "projects/p/jobs/iris_1",
    "project_id": "p",
    "output_dir": "gs://b/jobs/iris_1",
    "is_hyperparameter_tuning_job": False,
    "best_trial": None,
}
TUNED_SUMMARY: dict[str, Any] = {
    "job_id": "iris_2",
    "state": "SUCCEEDED",
    "backend": "vertex",
    "name": "projects/123/locations/us-central1/hyperparameterTuningJobs/9",
    "output_dir": "gs://b/jobs/iris_2/",
    "is_hyperparameter_tuning_job": True,
    "hyperparameter_metric_tag": "accuracy",
    "goal": "MAXIMIZE",
    "best_trial": {"trialId": "3", "finalMetric": {"objectiveValue": 0.97}},
}


def _ids(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _json(obj: Any) -> Any:
    import json

    return json.loads(Serde.to_json(obj))


class TestNaming:
    @pytest.mark.parametrize(
        ("uri", "expected"),
        [
            ("gs://b/data/train.csv", ("gs://b", "data/train.csv")),
            ("gs://b/jobs/run/", ("gs://b", "jobs/run")),
            ("gs://b", ("gs://b", "/")),
            ("gs://b/", ("gs://b", "/")),
            ("gs://b/data/part-*.csv", ("gs://b", "data")),
            ("gs://b/*", ("gs://b", "/")),
        ],
    )
    def test_gcs_uri_is_bucket_namespace_and_object_path(self, uri: str, expected: tuple[str, str]) -> None:
        assert gcs_dataset_id(uri) == expected

    @pytest.mark.parametrize("uri", ["s3://b/x", "/local/x.csv", "gs://", "", None, 3])
    def test_anything_else_is_not_a_gcs_dataset(self, uri: Any) -> None:
        assert gcs_dataset_id(uri) is None

    def test_staged_uri_carries_its_sha256(self) -> None:
        assert staged_sha256(STAGED) == SHA
        assert staged_sha256("gs://b/pkgs/trainer-0.1.tar.gz") is None
        assert staged_sha256(None) is None


class TestArgScanning:
    def test_flag_values_in_both_spellings_positional_and_lists(self) -> None:
        args = [
            "--train-data",
            "gs://b/d/train.csv",
            "--eval-data=gs://b/d/eval.csv",
            "--epochs",
            "2",
            "gs://b/d/extra.csv",
            "--shards=gs://b/s/1.csv,gs://b/s/2.csv",
            3,
            "--verbose",
            "--train-data",
            "gs://b/d/train.csv",  # once
        ]
        assert gcs_uris_in_args(args) == [
            "gs://b/d/train.csv",
            "gs://b/d/eval.csv",
            "gs://b/d/extra.csv",
            "gs://b/s/1.csv",
            "gs://b/s/2.csv",
        ]

    def test_what_the_job_writes_is_not_an_input(self) -> None:
        args = [
            "--job-dir",
            "gs://b/out",
            "--model-dir=gs://b/jobs/1/model",
            "--data",
            "gs://b/jobs/10/x.csv",
        ]
        assert gcs_uris_in_args(args, exclude_under="gs://b/jobs/1/") == ["gs://b/jobs/10/x.csv"]

    @pytest.mark.parametrize("args", [None, "--data gs://b/x", {"args": ["gs://b/x"]}])
    def test_not_a_list_gives_nothing(self, args: Any) -> None:
        assert gcs_uris_in_args(args) == []

    def test_args_and_packages_found_in_ml_and_vertex_specs(self) -> None:
        training_input = {"args": ["--data", "gs://b/a.csv"], "packageUris": ["gs://b/p.tar.gz"]}
        vertex_job = {
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "pythonPackageSpec": {
                            "args": ["--more=gs://b/c.csv"],
                            "packageUris": ["gs://b/q.tar.gz"],
                        }
                    }
                ]
            }
        }
        assert values_under([training_input, vertex_job], "args") == [
            "--data",
            "gs://b/a.csv",
            "--more=gs://b/c.csv",
        ]
        assert values_under([training_input, vertex_job], "packageUris") == [
            "gs://b/p.tar.gz",
            "gs://b/q.tar.gz",
        ]


class TestBuildAndStage:
    def test_build_outputs_the_sdist_with_its_sha256(self) -> None:
        result = build_lineage(BUILT)
        assert result is not None
        assert _ids(result.inputs) == [("file", BUILT["source"])]
        (sdist,) = result.outputs
        assert (sdist.namespace, sdist.name) == ("file", BUILT["path"])
        facets = _json(sdist)["facets"]
        assert facets["aipPackage"] == {
            "_producer": lineage.PRODUCER,
            "_schemaURL": f"{lineage.SCHEMA_URL}#/$defs/AipPackageDatasetFacet",
            "sha256": SHA,
            "packageName": "iris-trainer",
            "packageVersion": "0.1.0",
            "size": 5923,
        }
        assert facets["version"]["datasetVersion"] == SHA

    def test_build_that_staged_outputs_the_staged_uri_too(self) -> None:
        result = build_lineage({**BUILT, "uri": STAGED})
        assert result is not None
        assert _ids(result.outputs) == [("file", BUILT["path"]), STAGED_ID]

    def test_build_without_a_result_reports_nothing(self) -> None:
        result = build_lineage(None)
        assert result is not None
        assert (result.inputs, result.outputs) == ([], [])

    def test_stage_joins_the_build_and_names_the_staged_package(self, tmp_path: Path) -> None:
        local = tmp_path / "dep-1.0.tar.gz"
        dep_sha = "f" * 64
        packages = [BUILT, str(local), "gs://other/given-1.0.whl"]
        staged = [STAGED, f"gs://b/staging/{dep_sha}/dep-1.0.tar.gz", "gs://other/given-1.0.whl"]
        result = stage_lineage(packages, staged)
        assert result is not None
        assert _ids(result.inputs) == [
            ("file", BUILT["path"]),  # the build's own name for it, even if rebuilt here
            ("file", str(local)),
            ("gs://other", "given-1.0.whl"),
        ]
        assert _ids(result.outputs) == [STAGED_ID, ("gs://b", f"staging/{dep_sha}/dep-1.0.tar.gz")]
        shas = [_json(d)["facets"].get("aipPackage", {}).get("sha256") for d in result.outputs]
        assert shas == [SHA, dep_sha]  # the build's, then the one the staged URI is named by

    def test_stage_of_a_package_built_and_staged_in_one_task(self) -> None:
        result = stage_lineage({**BUILT, "uri": STAGED}, [STAGED])  # a bare package, as accepted
        assert result is not None
        assert (_ids(result.inputs), result.outputs) == ([STAGED_ID], [])

    def test_stage_before_it_returned_names_its_inputs_only(self) -> None:
        result = stage_lineage([BUILT], None)
        assert result is not None
        assert (_ids(result.inputs), result.outputs) == ([("file", BUILT["path"])], [])


class TestSubmit:
    def test_ml_v1_job_reads_its_data_and_package_and_writes_its_output_dir(self) -> None:
        args = [
            "--train-data",
            "gs://b/d/train.csv",
            "--eval-data=gs://b/d/eval.csv",
            "--out=gs://b/jobs/iris_1/m",
        ]
        result = submit_lineage(ML_SUMMARY, [{"args": args, "packageUris": [STAGED]}])
        assert result is not None
        assert _ids(result.inputs) == [("gs://b", "d/train.csv"), ("gs://b", "d/eval.csv"), STAGED_ID]
        assert _json(result.inputs[2])["facets"]["aipPackage"]["sha256"] == SHA
        assert _ids(result.outputs) == [("gs://b", "jobs/iris_1")]
        job = _json(result.run_facets["aipTrainingJob"])
        assert job["jobId"] == "iris_1"
        assert job["name"] == "projects/p/jobs/iris_1"
        assert job["state"] == "SUCCEEDED"
        assert job["hyperparameterTuning"] is False
        assert "bestMetric" not in job

    def test_vertex_tuning_job_names_its_best_trial_and_reads_specs(self, tmp_path: Path) -> None:
        config = tmp_path / "config.yaml"
        config.write_text("trainingInput:\n  args: ['--extra', 'gs://b/d/from_config.csv']\n")
        vertex_job = {
            "studySpec": {},
            "trialJobSpec": {"workerPoolSpecs": [{"pythonPackageSpec": {"packageUris": [STAGED]}}]},
        }
        specs = ({"args": ["--train-data", "gs://b/d/train.csv"]}, str(config), vertex_job)
        result = submit_lineage(TUNED_SUMMARY, specs)
        assert result is not None
        assert _ids(result.inputs) == [("gs://b", "d/train.csv"), ("gs://b", "d/from_config.csv"), STAGED_ID]
        assert _ids(result.outputs) == [("gs://b", "jobs/iris_2")]
        job = _json(result.run_facets["aipTrainingJob"])
        assert (job["bestTrialId"], job["bestMetric"], job["metricTag"]) == ("3", 0.97, "accuracy")
        assert job["hyperparameterTuning"] is True

    def test_an_unreadable_config_adds_nothing(self, tmp_path: Path) -> None:
        result = submit_lineage(
            ML_SUMMARY, [{"args": ["--data", "gs://b/a.csv"]}, str(tmp_path / "missing.yaml")]
        )
        assert result is not None
        assert _ids(result.inputs) == [("gs://b", "a.csv")]

    def test_no_summary_still_names_the_inputs(self) -> None:
        result = submit_lineage(None, [{"args": ["--data", "gs://b/a.csv"]}])
        assert result is not None
        assert (_ids(result.inputs), result.outputs, result.run_facets) == ([("gs://b", "a.csv")], [], {})


class TestExportAndRegister:
    EXPORTED: dict[str, Any] = {
        "job_id": "iris_1",
        "trial_id": None,
        "metric": 0.93,
        "metric_tag": "accuracy",
        "destination": "gs://b/models/iris/iris_1",
        "manifest_uri": "gs://b/models/iris/iris_1/manifest.json",
        "exported": True,
        "promoted": True,
        "source_uri": "gs://b/jobs/iris_1/model",
        "job_output_dir": "gs://b/jobs/iris_1/",
    }

    def test_export_reads_the_model_in_the_jobs_output_and_writes_the_copy(self) -> None:
        result = export_lineage(self.EXPORTED)
        assert result is not None
        assert _ids(result.inputs) == [("gs://b", "jobs/iris_1/model"), ("gs://b", "jobs/iris_1")]
        assert _ids(result.outputs) == [("gs://b", "models/iris/iris_1")]
        model = _json(result.outputs[0])["facets"]["aipModel"]
        assert (model["metric"], model["metricTag"], model["jobId"]) == (0.93, "accuracy", "iris_1")
        assert model["manifestUri"] == "gs://b/models/iris/iris_1/manifest.json"

    def test_a_model_from_an_earlier_job_does_not_join_this_jobs_output(self) -> None:
        result = export_lineage({**self.EXPORTED, "source_uri": "gs://b/jobs/iris_0/4/model"})
        assert result is not None
        assert _ids(result.inputs) == [("gs://b", "jobs/iris_0/4/model")]

    def test_a_model_that_did_not_beat_the_champion_reports_its_input_only(self) -> None:
        kept = {**self.EXPORTED, "exported": False, "promoted": False, "destination": None}
        result = export_lineage(kept)
        assert result is not None
        assert result.outputs == []
        assert _ids(result.inputs)[0] == ("gs://b", "jobs/iris_1/model")

    def test_register_outputs_the_registry_version(self) -> None:
        result = register_lineage(
            {
                "artifact_uri": "gs://b/models/iris/iris_1/",
                "model": "projects/p/locations/us-central1/models/iris-retrained",
                "version_id": "3",
                "version_name": "projects/p/locations/us-central1/models/iris-retrained@3",
                "aliases": ["champion", "default"],
                "metric": 0.93,
                "metric_tag": "accuracy",
                "promoted": True,
            }
        )
        assert _ids(result.inputs) == [("gs://b", "models/iris/iris_1")]
        assert _ids(result.outputs) == [("vertexai://p/us-central1", "models/iris-retrained")]
        facets = _json(result.outputs[0])["facets"]
        assert facets["version"]["datasetVersion"] == "3"
        version = facets["aipModelVersion"]
        assert version["versionName"] == "projects/p/locations/us-central1/models/iris-retrained@3"
        assert version["aliases"] == ["champion", "default"]
        assert (version["metric"], version["metricTag"], version["promoted"]) == (0.93, "accuracy", True)

    def test_register_of_a_model_that_is_not_a_resource_name(self) -> None:
        result = register_lineage({"artifact_uri": "gs://b/m", "model": "iris-retrained", "aliases": None})
        assert _ids(result.outputs) == [("vertexai", "iris-retrained")]
        assert "version" not in _json(result.outputs[0])["facets"]


class TestFacetTypes:
    """Our facet classes are module-level classes of ``facet_types``: they pickle as they are."""

    KINDS: dict[str, dict[str, Any]] = {
        "AipPackageDatasetFacet": {"sha256": SHA, "size": 5923},
        "AipTrainingJobRunFacet": {"jobId": "iris_2", "hyperparameterTuning": True, "bestMetric": 0.97},
        "AipModelDatasetFacet": {"jobId": "iris_2", "trialId": "3", "promoted": True},
        "AipModelVersionDatasetFacet": {"model": "models/m", "versionId": "3", "aliases": ["champion"]},
    }

    @pytest.mark.parametrize("kind", KINDS)
    def test_each_kind_is_a_module_level_class_that_pickles(self, kind: str) -> None:
        from airflow_aip.lineage import facet_types

        made = facet(kind, **self.KINDS[kind])
        cls = type(made)
        assert cls is getattr(facet_types, kind)
        assert (cls.__module__, cls.__qualname__) == ("airflow_aip.lineage.facet_types", kind)
        assert made._producer == lineage.PRODUCER
        assert made._schemaURL == f"{lineage.SCHEMA_URL}#/$defs/{kind}"
        copy = pickle.loads(pickle.dumps(made))
        assert copy == made
        assert _json(copy) == _json(made)

    def test_a_pickled_facet_loads_in_a_fresh_interpreter(self) -> None:
        """Which imports nothing of ours first: unpickling imports ``facet_types`` by itself."""
        made = facet("AipModelVersionDatasetFacet", model="models/m", aliases=["champion"])
        code = "import pickle, sys; print(repr(pickle.loads(sys.stdin.buffer.read()).aliases))"
        out = subprocess.run(
            [sys.executable, "-c", code], input=pickle.dumps(made), capture_output=True, check=True
        )
        assert out.stdout.decode().strip() == "['champion']"

    def test_an_unknown_kind_is_a_key_error(self) -> None:
        with pytest.raises(KeyError):
            facet("NoSuchFacet")


class TestOperators:
    """The operators' methods: what ``execute`` kept on the instance, the provider's arguments."""

    def test_each_operator_reports_what_it_kept(self) -> None:
        build = BuildTrainerPackageOperator(task_id="build", package_path="/dags/trainer")
        stage = StagePackagesOperator(task_id="stage", packages=[BUILT], staging_uri="gs://b/staging")
        export = ExportArtifactsOperator(task_id="export", job_id="iris_1", destination_uri="gs://b/models")
        build._lineage_result = BUILT
        stage._lineage_result = [STAGED]
        export._lineage_result = TestExportAndRegister.EXPORTED
        assert _ids(build.get_openlineage_facets_on_complete(None).outputs) == [("file", BUILT["path"])]
        assert _ids(stage.get_openlineage_facets_on_complete(None).outputs) == [STAGED_ID]
        assert _ids(export.get_openlineage_facets_on_complete(None).outputs) == [
            ("gs://b", "models/iris/iris_1")
        ]

    def test_submit_reads_its_rendered_arguments_and_the_summary_it_kept(self) -> None:
        op = SubmitTrainingJobOperator(
            task_id="train",
            backend="ai_platform",
            training_input={"packageUris": [STAGED], "args": ["--train-data", "gs://b/d/train.csv"]},
            config={"trainingInput": {"args": ["--eval-data=gs://b/d/eval.csv"]}},
        )
        assert op._kept(dict(ML_SUMMARY)) == ML_SUMMARY
        result = op.get_openlineage_facets_on_complete(None)
        assert _ids(result.inputs) == [("gs://b", "d/train.csv"), ("gs://b", "d/eval.csv"), STAGED_ID]
        assert _ids(result.outputs) == [("gs://b", "jobs/iris_1")]

    def test_a_resumed_submit_keeps_what_execute_complete_returned(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        op = SubmitTrainingJobOperator(
            task_id="train", backend="vertex", training_input={"args": ["--data", "gs://b/a.csv"]}
        )
        seen: list[Any] = []

        def execute_complete(context: Any, event: dict[str, Any]) -> dict[str, Any]:
            seen.append(event)
            return dict(TUNED_SUMMARY)

        monkeypatch.setattr(op, "execute_complete", execute_complete)
        resumed = op.resume_execution("execute_complete", {"event": {"status": "success"}}, {})
        assert resumed == TUNED_SUMMARY
        assert seen == [{"status": "success"}]
        result = op.get_openlineage_facets_on_complete(None)
        assert _ids(result.outputs) == [("gs://b", "jobs/iris_2")]
        assert _json(result.run_facets["aipTrainingJob"])["bestMetric"] == 0.97

    def test_nothing_kept_reports_no_outputs(self) -> None:
        op = BuildTrainerPackageOperator(task_id="build", package_path="/dags/trainer")
        assert op.get_openlineage_facets_on_complete(None).outputs == []


class TestWithoutTheProvider:
    """On a worker without apache-airflow-providers-openlineage nothing raises: there is no lineage."""

    @pytest.fixture(autouse=True)
    def _no_openlineage(self, monkeypatch: pytest.MonkeyPatch) -> None:
        names = [n for n in sys.modules if n.startswith(("openlineage", "airflow.providers.openlineage"))]
        for name in {*names, "openlineage", "airflow.providers.openlineage"}:
            monkeypatch.setitem(sys.modules, name, None)  # None: "import ..." raises ImportError

    def test_builders_return_none(self) -> None:
        assert build_lineage(BUILT) is None
        assert stage_lineage([BUILT], [STAGED]) is None
        assert (
            submit_lineage(ML_SUMMARY, [{"args": ["--data", "gs://b/a.csv"], "packageUris": [STAGED]}])
            is None
        )
        assert export_lineage(TestExportAndRegister.EXPORTED) is None
        assert (
            register_lineage({"artifact_uri": "gs://b/m", "model": "projects/p/locations/l/models/m"}) is None
        )

    def test_operator_methods_return_none(self) -> None:
        op = BuildTrainerPackageOperator(task_id="build", package_path="/dags/trainer")
        op._lineage_result = BUILT
        assert op.get_openlineage_facets_on_complete(None) is None
        submit = SubmitTrainingJobOperator(task_id="train", backend="ai_platform")
        assert submit.get_openlineage_facets_on_complete(None) is None

    def test_pure_naming_needs_no_provider(self) -> None:
        assert gcs_dataset_id("gs://b/x.csv") == ("gs://b", "x.csv")
        assert gcs_uris_in_args(["--x", "gs://b/x.csv"]) == ["gs://b/x.csv"]
