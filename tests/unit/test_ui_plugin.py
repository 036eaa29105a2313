"""The plugin as Airflow reads it: cheap to import, valid views, an app built only on demand."""

from __future__ import annotations

import subprocess
import sys

from airflow_aip.ui import URL_PREFIX, AipUiPlugin


def test_importing_the_plugin_imports_no_fastapi_nor_the_app() -> None:
    # Every task process imports every plugin: the app (FastAPI, SQLAlchemy models) must wait.
    code = (
        "import sys, airflow_aip.ui\n"
        "heavy = [m for m in ('fastapi', 'airflow_aip.ui.app', 'airflow_aip.ui.views') if m in sys.modules]\n"
        "print(heavy)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert found.stdout.strip() == "[]"


def test_views_validate_as_airflow_serves_them() -> None:
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse

    views = [ExternalViewResponse.model_validate(v) for v in AipUiPlugin.external_views]

    assert [(v.destination, v.url_route) for v in views] == [
        ("task_instance", "aip-training-job"),
        ("dag_run", "aip-run-training-jobs"),
        ("nav", "aip-training-jobs"),
    ]
    # relative hrefs follow [api] base_url; ids go in the query string (run ids hold ':' and '+')
    assert all(v.href.startswith("aip/ui/") for v in views)


def test_app_is_built_on_first_read_and_hides_its_docs() -> None:
    apps = AipUiPlugin().fastapi_apps

    assert [(a["url_prefix"], a["name"]) for a in apps] == [(URL_PREFIX, "airflow_aip")]
    assert AipUiPlugin.fastapi_apps is apps  # built once, from the class or an instance
    assert apps[0]["app"].openapi_url is None
    assert apps[0]["app"].docs_url is None
