"""The filter language of jobs.list and entries:list."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.logs.filters import (
    ML_JOB_FILTER_FIELDS,
    VERTEX_JOB_FILTER_FIELDS,
    Comparison,
    equality_key,
    parse_filter,
    required_equalities,
)

JOB = {
    "jobId": "census_20240101",
    "state": "FAILED",
    "labels": {"team": "ml", "ml.googleapis.com/x": "7"},
    "createTime": "2024-01-02T10:00:00.000000Z",
    "trainingInput": {"packageUris": ["gs://b/a.tar.gz", "gs://b/dep.whl"], "workerCount": "3"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jobId:census*", True),
        ("jobId:rnn*", False),
        ("jobId:census* AND state:FAILED", True),
        ("jobId:census* state=SUCCEEDED", False),
        ("state=SUCCEEDED OR state=FAILED", True),
        ("NOT state=FAILED", False),
        ("-state=FAILED", False),
        ("state!=SUCCEEDED", True),
        ("state:failed", True),
        ("state=failed", False),
        ("labels.team=ml", True),
        ('labels."ml.googleapis.com/x"=7', True),
        ("labels:team", True),
        ("labels:owner", False),
        ('createTime>"2024-01-01T00:00:00Z"', True),
        ('createTime<="2024-01-02T09:59:59+00:00"', False),
        ("trainingInput.workerCount>=3", True),
        ("trainingInput.workerCount<3", False),
        ("trainingInput.packageUris:*dep.whl", True),
        ("(state=X OR jobId=census_20240101) AND labels.team=ml", True),
        ("missing.field=1", False),
        ("missing.field!=1", True),
    ],
)
def test_filter_matches_like_google_lists(text: str, expected: bool) -> None:
    node = parse_filter(text)
    assert node is not None
    assert node.matches(JOB) is expected


@pytest.mark.parametrize("text", ["", "   ", None])
def test_empty_filter_is_no_filter(text: str | None) -> None:
    assert parse_filter(text) is None


@pytest.mark.parametrize("text", ["state=", "(state=a", "=a", "state a", "state=a)", 'state="open'])
def test_malformed_filter_is_a_validation_error_on_filter(text: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_filter(text)
    assert error.value.field == "filter"


def test_required_equalities_narrow_only_conjunctions() -> None:
    assert required_equalities(parse_filter('resource.labels.job_id="j1" AND severity>=ERROR')) == {
        ("resource", "labels", "job_id"): "j1"
    }
    assert required_equalities(parse_filter('resource.labels.job_id="j1" OR severity=ERROR')) == {}
    assert required_equalities(parse_filter("jobId=abc*")) == {}


@pytest.mark.parametrize(
    ("actual", "literal"),
    [
        ("a", "a"),
        ("a", "A"),
        ("1", "1.0"),
        (1, "1"),
        ("1e3", "1000"),
        (True, "true"),
        (None, "None"),
        ("nan", "nan"),
        (" 2", "2"),
        ("10000000000000000001", "10000000000000000000"),  # as numbers, as the scan compares them
        ({"k": "v"}, "k"),
        ("inf", "Infinity"),
        ("x1", "x1"),
    ],
)
def test_equality_key_agrees_with_the_filters_equals(actual: object, literal: str) -> None:
    key = equality_key(actual)
    same = key is not None and key == equality_key(literal)
    assert same is Comparison(("f",), "=", literal).matches({"f": actual})


def test_whole_numbers_compare_exactly_so_neighbouring_vertex_job_ids_do_not_match() -> None:
    node = parse_filter('resource.labels.job_id="1000000000000000001"')
    assert node is not None
    assert node.matches({"resource": {"labels": {"job_id": "1000000000000000001"}}})
    assert not node.matches({"resource": {"labels": {"job_id": "1000000000000000000"}}})
    assert parse_filter("trainingOutput.completedTrialCount=2.0").matches(  # type: ignore[union-attr]
        {"trainingOutput": {"completedTrialCount": "2"}}
    )


VERTEX_JOB = {
    "displayName": "My_Job_1",
    "state": "JOB_STATE_FAILED",
    "labels": {"team": "ml"},
    "createTime": "2024-01-02T10:00:00.000000Z",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('display_name:"My_Job_*"', True),
        ('display_name:"my_job_*"', False),
        ('display_name:"my_job_1"', False),  # ":" is case-sensitive on Vertex
        ('display_name:"My_Job_1"', True),
        ('state="JOB_STATE_FAILED"', True),
        ("labels.team:*", True),
        ("labels.owner:*", False),
        ('create_time="2024-01-02T11:00:00+01:00"', True),  # instants, whatever the offset
        ('create_time>="2024-01-02t10:00:00.000000001z"', False),
    ],
)
def test_vertex_fields_match_as_documented(text: str, expected: bool) -> None:
    node = parse_filter(text, VERTEX_JOB_FILTER_FIELDS)
    assert node is not None
    assert node.matches(VERTEX_JOB) is expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ('display_name="a?c"', "abc", False),
        ('display_name="a?c*"', "abcd", False),  # fnmatch would take "?" as any character
        ('display_name="a?c*"', "a?cd", True),
        ('display_name="[ab]c*"', "ac1", False),  # nor "[...]" as a character class
        ('display_name="[ab]c*"', "[ab]c1", True),
        ('display_name="a*c"', "abbbc", True),  # "*" is Google's one wildcard
        ('display_name="a*c"', "abbbd", False),
        ('display_name="a.c*"', "abc", False),  # nor a regex "."
    ],
)
def test_only_the_star_is_a_wildcard(text: str, name: str, expected: bool) -> None:
    node = parse_filter(text, VERTEX_JOB_FILTER_FIELDS)
    assert node is not None
    assert node.matches({**VERTEX_JOB, "displayName": name}) is expected


@pytest.mark.parametrize(
    "text",
    [
        'labels.team!="ml"',
        'labels.team:"ml"',
        'create_time>"2024-01-02"',
        'create_time>"2024-01-02T10:00:00"',
        'create_time>"2024-02-30T10:00:00Z"',
        "state=FAILED",
        "state=4",
        "state:JOB_STATE_FAILED",
    ],
)
def test_vertex_filters_google_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_filter(text, VERTEX_JOB_FILTER_FIELDS)
    assert error.value.field == "filter"


def test_ml_v1_fields_keep_the_lenient_forms() -> None:
    node = parse_filter('state:failed AND labels.team!="x" AND createTime>2024', ML_JOB_FILTER_FIELDS)
    assert node is not None
    assert node.matches(JOB)
