"""The values a task masked, carried to the trigger that relays the job's log from the triggerer."""

from __future__ import annotations

import uuid

from airflow.sdk._shared.secrets_masker import redact
from airflow.sdk.log import mask_secret

from airflow_aip.masking import amask_values, masked_values_in


def fresh_secret(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


def test_finds_masked_values_inside_nested_strings_and_nothing_else() -> None:
    token, password = fresh_secret("token"), fresh_secret("password")
    mask_secret(token)
    mask_secret(password)
    request = {
        "jobId": "j1",
        "trainingInput": {
            "args": ["--header", f"Authorization: Bearer {token}", "--epochs", "2"],
            "hyperparameters": {"params": [{"parameterName": password, "type": "DISCRETE"}]},
            "region": "us-central1",
        },
        "labels": {"owner": "ml-team"},
    }
    assert masked_values_in(request) == sorted([token, password])
    assert masked_values_in({"args": ["--epochs", "2"], "n": 3, "none": None}) == []
    assert masked_values_in(None) == []


async def test_amask_values_teaches_this_process_to_mask_them() -> None:
    learnt_elsewhere = fresh_secret("apikey")
    assert redact(f"key={learnt_elsewhere}") == f"key={learnt_elsewhere}"  # unknown here yet
    await amask_values([learnt_elsewhere])
    assert redact(f"key={learnt_elsewhere}") == "key=***"
