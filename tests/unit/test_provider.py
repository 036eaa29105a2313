"""The provider registers with Airflow and stays cheap to import."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

import airflow_aip
from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.base import DEFAULT_SCOPES, ConnectionSettings


def test_provider_info_carries_what_airflow_reads() -> None:
    info = airflow_aip.get_provider_info()
    assert info["package-name"] == "airflow-aip"
    assert info["versions"] == [airflow_aip.__version__]
    assert "poll_interval" in info["config"]["aip"]["options"]


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_aip")]
    assert [ep.load()()["package-name"] for ep in eps] == ["airflow-aip"]


# The one module that imports OpenLineage at its top: our facet classes derive from its facets.
# No DAG file imports it; only ``facets.facet`` does, when a task reports lineage. So it is left
# out of what DAG files import, and test_dag_facing_modules_import_no_openlineage checks that
# nothing else imports it at import time (it would then be loaded, and OpenLineage with it).
_LAZY_ONLY = ("airflow_aip.lineage.facet_types",)

# What a DAG file imports: every module of the DAG-facing packages and of the lineage builders.
_IMPORT_DAG_FACING = (
    "import sys, json, importlib, pkgutil\n"
    "import airflow.sdk\n"
    # Airflow's own import cost is not ours: its providers manager reads every installed
    # provider's info (airflow.providers.openlineage and its get_provider_info among them).
    "before = set(sys.modules)\n"
    "import airflow_aip, airflow_aip.operators, airflow_aip.sensors, airflow_aip.triggers\n"
    "import airflow_aip.hooks, airflow_aip.hooks.base, airflow_aip.lineage\n"
    "pkgs = (airflow_aip.operators, airflow_aip.sensors, airflow_aip.triggers, airflow_aip.hooks,\n"
    "        airflow_aip.lineage)\n"
    "for pkg in pkgs:\n"
    "    for m in pkgutil.iter_modules(pkg.__path__):\n"
    f"        if f'{{pkg.__name__}}.{{m.name}}' not in {_LAZY_ONLY!r}:\n"
    "            importlib.import_module(f'{pkg.__name__}.{m.name}')\n"
)


def _loaded_by_dag_imports(prefixes: tuple[str, ...], *, new_only: bool = False) -> list[str]:
    """The modules under ``prefixes`` a fresh interpreter holds once it imported what DAGs import.

    Bare namespace packages (no ``__file__``) are not libraries: the Vertex AI SDK, a test-only
    dependency, installs *-nspkg.pth files that create 'google' and 'google.cloud' at startup.
    ``new_only``: only those the DAG-facing imports added to what ``import airflow.sdk`` loaded.
    """
    code = _IMPORT_DAG_FACING + (
        f"prefixes = {prefixes!r}\n"
        f"loaded = [m for m, mod in sys.modules.items() if m.startswith(prefixes)\n"
        f"          and getattr(mod, '__file__', None) and not ({new_only!r} and m in before)]\n"
        "print(json.dumps(sorted(loaded)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_dag_facing_modules_import_no_heavy_client_library() -> None:
    """What a DAG file imports must not pull googleapiclient, google.cloud or google.auth."""
    heavy = ("googleapiclient", "google.cloud", "google.auth", "google.oauth2", "optuna")
    assert _loaded_by_dag_imports(heavy) == []


def test_dag_facing_modules_import_no_openlineage() -> None:
    """OpenLineage is optional and imported only when the provider asks for lineage, in the worker.

    The provider is installed here (the ``dev`` extra), so the check means something: importing
    the operators and ``airflow_aip.lineage`` adds nothing of it, nor of the OpenLineage client.
    """
    assert importlib.util.find_spec("airflow.providers.openlineage.extractors") is not None
    assert importlib.util.find_spec("openlineage.client") is not None
    prefixes = ("openlineage", "airflow.providers.openlineage", *_LAZY_ONLY)
    assert _loaded_by_dag_imports(prefixes, new_only=True) == []


class TestConnectionSettings:
    def test_reads_prefixed_and_plain_extras(self) -> None:
        s = ConnectionSettings.from_extras(
            {"extra__google_cloud_platform__project": "p1", "key_path": "/k.json", "scope": "a, b"}
        )
        assert (s.project_id, s.key_path, s.scopes) == ("p1", "/k.json", ("a", "b"))

    def test_plain_extra_wins_over_prefixed(self) -> None:
        s = ConnectionSettings.from_extras(
            {"project": "plain", "extra__google_cloud_platform__project": "old"}
        )
        assert s.project_id == "plain"

    def test_keyfile_dict_as_json_string_is_parsed_and_never_in_repr(self) -> None:
        key = {"type": "service_account", "private_key": "SECRET-MATERIAL", "project_id": "kp"}
        s = ConnectionSettings.from_extras({"keyfile_dict": json.dumps(key)})
        assert s.keyfile_dict == key
        assert "SECRET-MATERIAL" not in repr(s)

    def test_bad_keyfile_dict_names_the_field_without_echoing_it(self) -> None:
        with pytest.raises(ValidationError, match="keyfile_dict") as err:
            ConnectionSettings.from_extras({"keyfile_dict": "not-json-SECRET"})
        assert "SECRET" not in str(err.value)

    def test_defaults_to_cloud_platform_scope(self) -> None:
        assert ConnectionSettings.from_extras({}).scopes == DEFAULT_SCOPES
