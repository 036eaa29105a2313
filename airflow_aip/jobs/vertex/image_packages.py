"""What Google's training runtimes ship beside the framework: one table, each list with its source.

A trainer on Vertex AI is pip-installed into a pre-built container that already holds its
framework *and* Google's and the data libraries (google-cloud-storage, pandas, NumPy, SciPy,
cloudml-hypertune...). Google's own samples import ``google.cloud.storage`` without declaring it,
and AI Platform's runtime versions shipped the same kind of list. A local environment without
them fails where Google succeeds: the false red this table exists to prevent.

Each entry is a requirement as the image carries it (``pandas==2.2.3``, under the name the image
uses: ``tensorflow``, not ``tensorflow-cpu``), with its source:

- **[P]** Google's page lists it for this image, version included where given;
- **[P*]** Google lists it for the Vertex image of the same framework release on Python 3.7,
  taken as AI Platform's runtime version of that number (only xgboost 1.4.0 for 2.5 is confirmed
  independently);
- ``[U]`` marks an unconfirmed entry: what real images are documented or observed to contain
  (the Deep Learning Containers base under the newer TensorFlow and PyTorch images, whose list
  Google does not publish), left unpinned so it resolves for the image's Python.

Sources:

- VERTEX: "Prebuilt containers for custom training", Included dependencies, PyPI packages:
  https://cloud.google.com/vertex-ai/docs/training/pre-built-containers
- SAMPLES: GoogleCloudPlatform/vertex-ai-samples @ cc0d791e, trainers on tf-cpu.2-8 and
  pytorch-gpu.1-7..1-13 that import google.cloud.storage, numpy and pandas without declaring them
  (so the Deep Learning Containers base ships them)
- KOKORO: GoogleCloudPlatform/ai-platform-samples ``.kokoro/tests/run_notebooks_only_diff.sh``,
  "Install AI Platform pre-requisites: .../runtime-version-list" (names only, no versions)

Not installable from PyPI on a machine like this one, so left out, and said so here:
``sklearn`` (PyPI's placeholder refuses to install; ``scikit-learn`` is the package) and
``witwidget`` (a notebook widget). PyTorch's PyPI build is the CUDA one; it runs on the CPU.
"""

from __future__ import annotations

VERTEX = "[P] Vertex AI pre-built training containers, Included dependencies"
SAMPLES = "[U] Deep Learning Containers base, as Google's samples rely on it (vertex-ai-samples)"
KOKORO = "[U] AI Platform runtime version list, names from ai-platform-samples .kokoro (no versions)"
VERTEX_PY37 = "[P*] the same release's Vertex AI Python 3.7 image, Included dependencies"
UNCONFIRMED = " [U]"

# What every newer image (TensorFlow >= 2.5, PyTorch, XGBoost 2, Ray) carries from the Deep
# Learning Containers base, unlisted by Google: its samples import these without declaring them.
DLC_BASE = (
    "google-cloud-storage [U]",
    "google-api-python-client [U]",
    "pandas [U]",
    "numpy [U]",
    "scipy [U]",
    "cloudml-hypertune",
)

# AI Platform Training's runtimes: the kokoro list, less what PyPI cannot give (see above).
_AI_PLATFORM_LIBRARIES = (
    "google-api-python-client [U]",
    "google-cloud-bigquery [U]",
    "google-cloud-bigtable [U]",
    "google-cloud-datastore [U]",
    "google-cloud-logging [U]",
    "google-cloud-pubsub [U]",
    "google-cloud-resource-manager [U]",
    "google-cloud-storage [U]",
    "absl-py [U]",
    "cloudml-hypertune",
    "joblib [U]",
    "numpy [U]",
    "pandas [U]",
    "scipy [U]",
    "scikit-learn [U]",
    "oauth2client [U]",
    "httplib2 [U]",
    "python-dateutil [U]",
    "PyYAML [U]",
    "requests [U]",
    "six [U]",
    "tabulate [U]",
)

# (image prefix, framework version) -> what the image ships besides its Python, from VERTEX.
IMAGES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("sklearn", "1.6"): (
        (
            "numpy==1.26.4",
            "pandas==2.2.3",
            "scipy==1.15.2",
            "scikit-learn==1.6.1",
            "sympy==1.12",
            "xgboost==2.1.3",
            "oauth2client==4.1.3",
            "httplib2==0.22.0",
            "python-dateutil==2.9.0.post0",
            "six==1.17.0",
            "wrapt==1.17.2",
            "google-api-python-client==2.162.0",
            "python-json-logger==3.2.1",
            "WebOb==1.8.7",
            "Paste==3.7.1",
            "grpcio==1.71.0rc2",
            "requests==2.32.3",
            "webapp2==3.0.0b1",
            "mock==5.1.0",
            "google-cloud-bigquery==3.29.0",
            "google-cloud-datastore==1.15.5",
            "google-cloud-resource-manager==1.6.1",
            "google-cloud-storage==2.19.0",
            "joblib==1.4.2",
            "cloudml-hypertune",
            # Unlisted, so dated by the list: grpcio 1.71.0rc2 and google-api-python-client 2.162.0
            # are of February 2025, and these were the releases then. The newest ones print two
            # FutureWarnings on every import of google.cloud.storage here (google-auth's "grpcio <
            # 1.83.0 does not support Post-Quantum Cryptography", google.api_core's "non-supported
            # Python version (3.10)") that an image built then never prints: 4 WARNING lines per
            # trial in the task log (issue 52).
            "google-auth==2.38.0 [U]",
            "google-api-core==2.24.1 [U]",
        ),
        VERTEX,
    ),
    # Google's row (numpy 1.18.5, pandas 1.0.4...) looks copied from scikit-learn 0.23's; these are
    # the versions observed in the image (a public requirements file, [O]), Google's where it has none.
    ("sklearn", "1.0"): (
        (
            "scikit-learn==1.0",
            "numpy==1.19.5 [U]",
            "pandas==1.3.3 [U]",
            "scipy==1.7.1 [U]",
            "sympy==1.8 [U]",
            "xgboost==1.4.2 [U]",
            "joblib==1.1.0 [U]",
            "google-cloud-bigquery==2.28.1 [U]",
            "google-cloud-storage [U]",
            "google-api-python-client [U]",
            "cloudml-hypertune",
        ),
        VERTEX,
    ),
    ("xgboost", "1.1"): (
        (
            "numpy==1.18.5",
            "pandas==1.0.4",
            "scipy==1.4.1",
            "scikit-learn==0.23.1",
            "sympy==1.6",
            "statsmodels==0.11.1",
            "xgboost==1.1.1",
            "google-api-python-client==1.9.3",
            "google-cloud-storage==1.29.0",
            "joblib==0.15.1",
            "cloudml-hypertune",
        ),
        VERTEX,
    ),
    ("tf", "2.15"): (
        (
            "tensorflow==2.15.*",
            "numpy<2",
            "sympy==1.12",
            "xgboost==2.0.3",
            "python-json-logger==2.0.7",
            "WebOb==1.8.7",
            "Paste==3.7.1",
            "webapp2==3.0.0b1",
            "mock==5.1.0",
            "google-cloud-resource-manager==1.6.1",
            *DLC_BASE,
        ),
        VERTEX,
    ),
    ("pytorch", "2.4"): (
        (
            "torch==2.4.*",
            "pandas==2.2.3",
            "absl-py==2.1.0",
            "cloud-tpu-client==0.10",
            "python-json-logger==3.2.1",
            "scikit-learn==1.6.1",
            *DLC_BASE,
        ),
        VERTEX,
    ),
}

# AI Platform Training (ml v1) runtimeVersion -> what it shipped; all ran Python 3.7 (2.7 too for
# 1.15). 1.15 and 2.1 from VERTEX_PY37; xgboost for 2.5/2.8/2.11 likewise; the rest from KOKORO.
RUNTIME_VERSIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "1.15": (
        (
            "tensorflow==1.15.0",
            "numpy==1.16.5",
            "pandas==0.24.2",
            "scipy==1.2.2",
            "scikit-learn==0.20.4",
            "xgboost==0.82",
            "google-api-python-client==1.7.8",
            "google-cloud-storage==1.19.1",
            "google-cloud-bigquery==1.20.0",
            "google-cloud-logging==1.12.1",
            "google-cloud-pubsub==1.0.0",
            "joblib==0.13.0",
            "cloudml-hypertune",
        ),
        VERTEX_PY37,
    ),
    "2.1": (
        (
            "tensorflow==2.1.0",
            "numpy==1.18.0",
            "pandas==0.25.3",
            "scipy==1.4.1",
            "scikit-learn==0.22.1",
            "xgboost==0.90",
            "google-api-python-client==1.7.11",
            "google-cloud-storage==1.23.0",
            "google-cloud-bigquery==1.23.1",
            "google-cloud-logging==1.14.0",
            "google-cloud-pubsub==1.1.0",
            "joblib==0.14.1",
            "cloudml-hypertune",
        ),
        VERTEX_PY37,
    ),
    **{
        version: (("tensorflow==" + version + ".*", *_AI_PLATFORM_LIBRARIES, "xgboost [U]"), KOKORO)
        for version in ("2.2", "2.3", "2.4", "2.6", "2.7")
    },
    "2.5": (("tensorflow==2.5.*", "xgboost==1.4.0", *_AI_PLATFORM_LIBRARIES), KOKORO),
    "2.8": (("tensorflow==2.8.*", "xgboost==1.5.2", *_AI_PLATFORM_LIBRARIES), KOKORO),
    "2.11": (("tensorflow==2.11.*", "xgboost==1.6.2", *_AI_PLATFORM_LIBRARIES), KOKORO),
}

# An AI Platform job whose runtime version the executor is not told: its Google and data
# libraries, on the service's Python, unpinned.
AI_PLATFORM_LIBRARIES = (_AI_PLATFORM_LIBRARIES, KOKORO)


def requirement(entry: str) -> str:
    """``pandas==2.2.3 [U]`` -> ``pandas==2.2.3``: what an installer is given."""
    return entry.removesuffix(UNCONFIRMED)


def unconfirmed(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The requirements of ``entries`` marked ``[U]``."""
    return tuple(requirement(e) for e in entries if e.endswith(UNCONFIRMED))


def shipped(prefix: str, version: str) -> tuple[tuple[str, ...], str] | None:
    """What the image ``{prefix}-*.{version}`` ships beside its framework, or None if not listed."""
    return IMAGES.get((prefix, version))
