"""Vertex AI Metadata's handlers on the local service, called directly: names, IDs, links, filters,
pages, and records that outlive the service (its REST and gRPC faces, through Google's SDK:
tests/integration/test_local_experiments_sdk.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local.store import project_number
from airflow_aip.local.vertex.metadata_filter import Node, parse_metadata_filter
from airflow_aip.local.vertex.metadata_service import MetadataHandlers

PROJECT, LOCATION = "meta-project", "us-central1"
STORE = f"projects/{project_number(PROJECT)}/locations/{LOCATION}/metadataStores/default"


@pytest.fixture
def handlers(tmp_path: Path) -> MetadataHandlers:
    made = MetadataHandlers.at(tmp_path / "metadata")
    made.metadata.create_store(PROJECT, LOCATION, {}, "default")
    return made


def _context(handlers: MetadataHandlers, context_id: str, schema: str = "system.Experiment") -> str:
    body = {"schemaTitle": schema, "metadata": {"n": 1}}
    created = handlers.metadata.create("contexts", PROJECT, LOCATION, "default", body, context_id)
    return str(created["name"])


def test_a_store_is_created_in_an_operation_already_done_and_named_by_project_number(
    handlers: MetadataHandlers,
) -> None:
    store = handlers.metadata.get_store(PROJECT, LOCATION, "default")
    assert store["name"] == STORE
    with pytest.raises(JobAlreadyExistsError, match="already exists"):
        handlers.metadata.create_store(PROJECT, LOCATION, {}, "default")
    operation = handlers.metadata.create_store(PROJECT, LOCATION, {}, "other")
    assert operation["done"] is True
    assert operation["response"]["name"].endswith("/metadataStores/other")


@pytest.mark.parametrize("bad", ["Bad", "exp_1", "-lead", "a" * 129, "with space"])
def test_an_id_outside_google_s_rule_is_a_400_naming_the_id_field(
    handlers: MetadataHandlers, bad: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        handlers.metadata.create("contexts", PROJECT, LOCATION, "default", {}, bad)
    assert raised.value.field == "contextId"
    assert "[a-z0-9][a-z0-9-]{0,127}" in raised.value.rule
    assert handlers.metadata.list("contexts", PROJECT, LOCATION, "default", {}) == {"contexts": []}


def test_nodes_need_their_store_and_a_name_once(handlers: MetadataHandlers) -> None:
    with pytest.raises(JobNotFoundError, match="MetadataStore"):
        handlers.metadata.create("contexts", PROJECT, LOCATION, "missing", {}, "exp-1")
    _context(handlers, "exp-1")
    with pytest.raises(
        JobAlreadyExistsError, match=f"Context with name {STORE}/contexts/exp-1 already exists"
    ):
        _context(handlers, "exp-1")


def test_states_come_as_names_or_numbers_and_are_kept_as_names(handlers: MetadataHandlers) -> None:
    made = handlers.metadata.create("executions", PROJECT, LOCATION, "default", {"state": 2}, "exec-1")
    assert made["state"] == "RUNNING"
    patched = handlers.metadata.patch("executions", made["name"], {"state": "COMPLETE"}, None)
    assert patched["state"] == "COMPLETE"
    assert patched["etag"] != made["etag"]
    with pytest.raises(ValidationError, match="must be one of") as raised:
        handlers.metadata.patch("executions", made["name"], {"state": 42}, None)
    assert raised.value.field == "state"


def test_a_patch_with_a_mask_changes_only_what_it_names(handlers: MetadataHandlers) -> None:
    name = _context(handlers, "exp-1")
    body = {"metadata": {"_params": {"lr": 0.1}}, "displayName": "ignored"}
    patched = handlers.metadata.patch("contexts", name, body, "metadata")
    assert patched["metadata"] == {"_params": {"lr": 0.1}}
    assert "displayName" not in patched
    with pytest.raises(ValidationError) as raised:
        handlers.metadata.patch("contexts", name, body, "create_time")
    assert raised.value.field == "updateMask"


def test_children_and_attributions_are_what_the_sdk_s_filters_find(handlers: MetadataHandlers) -> None:
    experiment = _context(handlers, "exp-1")
    run = _context(handlers, "exp-1-run-1", "system.ExperimentRun")
    _context(handlers, "exp-1-run-2", "system.ExperimentRun")  # not a child: not listed
    execution = handlers.metadata.create("executions", PROJECT, LOCATION, "default", {}, "run-exec")["name"]
    handlers.links.add_context_children(experiment, [run])
    handlers.links.add_context_children(experiment, [run])  # twice is no error, and no duplicate
    handlers.links.add_artifacts_and_executions(experiment, [], [execution])

    wanted = f'parent_contexts:"{experiment}"'
    runs = handlers.metadata.list(
        "contexts",
        PROJECT,
        LOCATION,
        "default",
        {"filter": f'(schema_title="system.ExperimentRun" OR display_name="x") AND {wanted}'},
    )
    executions = handlers.metadata.list(
        "executions", PROJECT, LOCATION, "default", {"filter": f'in_context("{experiment}")'}
    )

    assert [found["name"] for found in runs["contexts"]] == [run]
    assert runs["contexts"][0]["parentContexts"] == [experiment]
    assert [found["name"] for found in executions["executions"]] == [execution]
    assert handlers.links.context_subgraph(experiment)["executions"][0]["name"] == execution
    with pytest.raises(ValidationError, match="cycle"):
        handlers.links.add_context_children(run, [experiment])


def test_an_execution_s_events_are_its_inputs_and_outputs(handlers: MetadataHandlers) -> None:
    execution = handlers.metadata.create("executions", PROJECT, LOCATION, "default", {}, "exec-1")["name"]
    artifact = handlers.metadata.create(
        "artifacts", PROJECT, LOCATION, "default", {"uri": "gs://b/m"}, "model"
    )
    handlers.links.add_execution_events(execution, [{"artifact": artifact["name"], "type": 2}])

    graph = handlers.links.execution_inputs_and_outputs(execution)

    assert [found["uri"] for found in graph["artifacts"]] == ["gs://b/m"]
    assert graph["events"][0]["type"] == "OUTPUT"
    with pytest.raises(JobNotFoundError):
        handlers.links.add_execution_events(execution, [{"artifact": f"{STORE}/artifacts/none", "type": 1}])


def test_lists_page_in_creation_order(handlers: MetadataHandlers) -> None:
    names = [_context(handlers, f"ctx-{index}") for index in range(5)]
    first = handlers.metadata.list("contexts", PROJECT, LOCATION, "default", {"pageSize": "2"})
    rest = handlers.metadata.list(
        "contexts", PROJECT, LOCATION, "default", {"pageSize": "10", "pageToken": first["nextPageToken"]}
    )
    assert [found["name"] for found in first["contexts"] + rest["contexts"]] == names
    assert "nextPageToken" not in rest


def test_records_outlive_the_service(handlers: MetadataHandlers, tmp_path: Path) -> None:
    experiment = _context(handlers, "exp-1")
    run = _context(handlers, "exp-1-run-1", "system.ExperimentRun")
    handlers.links.add_context_children(experiment, [run])
    handlers.metadata.patch("contexts", run, {"metadata": {"_metrics": {"acc": 0.9}}}, None)

    again = MetadataHandlers.at(tmp_path / "metadata")

    assert again.metadata.resource(run, "Context")["metadata"] == {"_metrics": {"acc": 0.9}}
    listed = again.metadata.list(
        "contexts", PROJECT, LOCATION, "default", {"filter": f'parent_contexts:"{experiment}"'}
    )
    assert [found["name"] for found in listed["contexts"]] == [run]
    assert _context(again, "exp-2").endswith("/exp-2")  # creation order goes on after the last


def test_the_default_tensorboard_is_listed_by_is_default_and_a_run_has_no_time_series(
    handlers: MetadataHandlers,
) -> None:
    boards = handlers.tensorboards
    assert boards.list(PROJECT, LOCATION, {"filter": "is_default=true"}) == {"tensorboards": []}
    first = boards.create(PROJECT, LOCATION, {"displayName": "one", "isDefault": True})["response"]["name"]
    second = boards.create(PROJECT, LOCATION, {"displayName": "two", "isDefault": True})["response"]["name"]
    defaults = boards.list(PROJECT, LOCATION, {"filter": "is_default = true"})["tensorboards"]
    assert [board["name"] for board in defaults] == [second]
    assert boards.get(first).get("isDefault") is False
    experiment = boards.create_child("experiments", second, {}, "exp-1", "tensorboardExperimentId")["name"]
    run = boards.create_child("runs", experiment, {}, "run-1", "tensorboardRunId")["name"]
    assert boards.list_time_series(run) == {"tensorboardTimeSeries": []}
    with pytest.raises(ValidationError) as raised:
        boards.create_child("runs", experiment, {}, "Run_1", "tensorboardRunId")
    assert raised.value.field == "tensorboardRunId"
    with pytest.raises(ValidationError) as raised:
        boards.list(PROJECT, LOCATION, {"filter": "labels.a=b"})
    assert raised.value.field == "filter"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('schema_title="system.Run"', True),
        ('schema_title != "system.Run"', False),
        ('display_name="a" OR schema_title="system.Run"', True),
        ('NOT in_context("c1")', False),
        ('in_context("c1") AND parent_contexts:"p2","p1"', True),
        ("metadata.acc.number_value > 0.5", True),
        ('metadata.acc.number_value <= 0.5 OR child_contexts:"k"', False),
    ],
)
def test_the_filter_grammar_the_sdk_sends(text: str, expected: bool) -> None:
    node = Node(
        resource={"schemaTitle": "system.Run", "metadata": {"acc": 0.9}},
        in_contexts=frozenset({"c1"}),
        parents=frozenset({"p1"}),
        children=frozenset(),
    )
    predicate = parse_metadata_filter(text)
    assert predicate is not None
    assert predicate(node) is expected


@pytest.mark.parametrize("text", ['labels.a="b"', 'schema_title:"x"', 'in_context("c"', "a = "])
def test_a_filter_outside_the_grammar_is_a_400_on_filter(text: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_metadata_filter(text)
    assert raised.value.field == "filter"
