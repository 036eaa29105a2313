"""Labels: Google's label rule and the Airflow identity labels."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    DAG_ID_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    airflow_labels,
    sanitize_label_key,
    sanitize_label_value,
    validate_labels,
)
from airflow_aip.jobs.labels import VERTEX_LABELS


def test_sanitize_value() -> None:
    assert sanitize_label_value("manual__2024-01-01T00:00:00+00:00") == "manual__2024-01-01t00-00-00-00-00"
    assert sanitize_label_value("My DAG") == "my-dag"


def test_long_values_keep_distinct_hashes() -> None:
    a, b = sanitize_label_value("r" * 100 + "a"), sanitize_label_value("r" * 100 + "b")
    assert len(a) == 63
    assert len(b) == 63
    assert a != b


def test_sanitize_key_starts_with_letter() -> None:
    assert sanitize_label_key("1team") == "k-1team"
    assert sanitize_label_key("Team") == "team"


def test_airflow_labels() -> None:
    labels = airflow_labels("My.Dag", "train", "scheduled__2024-01-01T00:00:00+00:00", {"Team": "ML Ops"})
    assert labels == {
        "team": "ml-ops",
        DAG_ID_LABEL: "my-dag",
        TASK_ID_LABEL: "train",
        RUN_ID_LABEL: "scheduled__2024-01-01t00-00-00-00-00",
    }
    assert validate_labels(labels) == labels


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"Upper": "x"}, "labels.Upper"),
        ({"1a": "x"}, "labels.1a"),
        ({"a": "With Space"}, "labels.a"),
        ({"a": 1}, "labels.a"),
        ({f"k{i}": "v" for i in range(65)}, "labels"),
        ("not-a-mapping", "labels"),
    ],
)
def test_validate_labels_rejects(labels: object, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_labels(labels)
    assert err.value.field == field


def test_vertex_takes_64_codepoints_and_international_characters() -> None:
    labels = {"k" * 64: "v" * 64, "équipe": "é" * 64, "チーム": "機械学習", "a": "", "k_1-x": "٣"}
    assert validate_labels(labels, rule=VERTEX_LABELS) == labels
    with pytest.raises(ValidationError):
        validate_labels({"équipe": "a"})  # ml v1's rule stays ASCII and 63


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"k" * 65: "v"}, "labels." + "k" * 65),
        ({"k": "v" * 65}, "labels.k"),
        ({"Équipe": "a"}, "labels.Équipe"),
        ({"k": "Données"}, "labels.k"),
        ({"1k": "v"}, "labels.1k"),
        ({"": "v"}, "labels."),
        ({"k": "a b"}, "labels.k"),
        ({f"k{i}": "v" for i in range(65)}, "labels"),
    ],
)
def test_vertex_rule_rejects(labels: object, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_labels(labels, rule=VERTEX_LABELS)
    assert err.value.field == field


def test_what_our_operators_generate_is_valid_on_both_apis() -> None:
    labels = airflow_labels("Dâg" * 40, "t", "manual__2024-01-01T00:00:00+00:00", {"Équipe Ω": "x" * 99})
    assert validate_labels(labels, rule=VERTEX_LABELS) == labels == validate_labels(labels)
