"""DAG-parse cost: what importing airflow_aip adds to a DAG file over ``airflow.sdk`` alone.

Every DAG file is re-parsed by the dag-processor again and again, so a heavy import is paid
forever. Each sample is a fresh interpreter, as the dag-processor's parsing child is.
Set AIP_BENCH_GOOGLE_PYTHON to a python with apache-airflow-providers-google installed to
measure its Vertex AI training operators the same way (optional; never a dependency).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common import Figure, Series

BASE = "import airflow.sdk"
OURS = (
    "import airflow.sdk\n"
    "from airflow_aip.operators import *  # noqa\n"
    "from airflow_aip.sensors import *  # noqa\n"
)
GOOGLE = (
    "import airflow.sdk\n"
    "from airflow.providers.google.cloud.operators.vertex_ai.custom_job import "
    "CreateCustomPythonPackageTrainingJobOperator  # noqa\n"
)
PROBE = (
    "import time, json\n"
    "t = time.perf_counter()\n"
    "exec(compile({code!r}, '<dag>', 'exec'))\n"
    "dt = time.perf_counter() - t\n"
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, from the runner that forked us.
    "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
    "print(json.dumps([dt, int(hwm.split()[1]) / 1024]))\n"
)


def measure(code: str, repeats: int, python: str = sys.executable) -> tuple[list[float], list[float]]:
    """(seconds, peak RSS MiB) of importing ``code`` in ``repeats`` fresh interpreters."""
    secs, rss = [], []
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    for _ in range(repeats):
        out = subprocess.run(
            [python, "-c", PROBE.format(code=code)], check=True, capture_output=True, text=True, env=env
        )
        dt, mib = json.loads(out.stdout.strip().splitlines()[-1])
        secs.append(dt)
        rss.append(mib)
    return secs, rss


def compile_package() -> None:
    """Byte-compile airflow_aip, as ``pip install`` does: an editable checkout under
    PYTHONDONTWRITEBYTECODE would otherwise compile every module on every parse, while Airflow's
    own modules (site-packages, compiled by ``make install``) would not."""
    import compileall
    from pathlib import Path

    import airflow_aip

    compileall.compile_dir(str(Path(airflow_aip.__file__).parent), quiet=1)


def run(repeats: int) -> list[Figure]:
    compile_package()
    measure(OURS, 1)  # warm the page cache and bytecode for both, so neither pays first-run costs
    base_s: list[float] = []
    base_m: list[float] = []
    ours_s: list[float] = []
    ours_m: list[float] = []
    for _ in range(max(repeats, 10)):  # interleaved, so a busy moment hits both sides alike
        for code, secs, rss in ((BASE, base_s, base_m), (OURS, ours_s, ours_m)):
            t, m = measure(code, 1)
            secs += t
            rss += m
    base_t, base_r = Series("import airflow.sdk", base_s), Series("import airflow.sdk", base_m)
    ours_t, ours_r = Series("airflow.sdk + airflow_aip", ours_s), Series("airflow.sdk + airflow_aip", ours_m)
    added_s = ours_t.median - base_t.median
    added_m = ours_r.median - base_r.median
    figures = [
        Figure(
            "DAG-parse cost",
            "import time, airflow.sdk + airflow_aip operators and sensors",
            "s",
            ours_t,
            base_t,
            goal=f"adds <= 0.15 s (added {added_s:.3f} s)",
            goal_met=added_s <= 0.15,
        ),
        Figure(
            "DAG-parse cost",
            "peak RSS, airflow.sdk + airflow_aip operators and sensors",
            "MiB",
            ours_r,
            base_r,
            goal=f"adds <= 20 MiB (added {added_m:.1f} MiB)",
            goal_met=added_m <= 20,
        ),
    ]
    google = os.environ.get("AIP_BENCH_GOOGLE_PYTHON")
    if google:
        g_s, g_m = measure(GOOGLE, repeats, google)
        gb_s, gb_m = measure(BASE, repeats, google)
        figures.append(
            Figure(
                "DAG-parse cost",
                "import time, provider-google Vertex AI training operators (its own venv)",
                "s",
                Series("provider-google", g_s),
                Series("import airflow.sdk (that venv)", gb_s),
            )
        )
        figures.append(
            Figure(
                "DAG-parse cost",
                "peak RSS, provider-google Vertex AI training operators (its own venv)",
                "MiB",
                Series("provider-google", g_m),
                Series("import airflow.sdk (that venv)", gb_m),
            )
        )
    else:
        figures[0].notes.append(
            "provider-google not measured in this run (set AIP_BENCH_GOOGLE_PYTHON); measured earlier "
            "on this machine it added 5.5-6 s and 216 MB over airflow.sdk."
        )
    return figures
