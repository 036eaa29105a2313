# The image docker-compose.yaml runs: the official Airflow 3 image plus airflow_aip.
#
# It installs `.[local]` (the operators and the local training service) with the repository's
# constraints.txt, the versions the test suite runs against, and the example trainer's
# dependencies, so the local training service installs trainer packages without a package index.
# AIRFLOW_VERSION picks the core (docs/airflow-versions.md): the official image of that version,
# and its pins: constraints.txt for 3.3.2 (the suite's own), else constraints/airflow-<version>.txt
# (the compat tier's: 3.1.8, 3.2.2, 3.4.0b2). `docker compose build --build-arg AIRFLOW_VERSION=3.1.8`,
# or AIRFLOW_VERSION=3.1.8 in the environment or an .env file.
ARG AIRFLOW_VERSION=3.3.2
ARG AIRFLOW_IMAGE=apache/airflow:${AIRFLOW_VERSION}-python3.11
FROM ${AIRFLOW_IMAGE}
ARG AIRFLOW_VERSION

# The local training service's data dir: a named volume copies this owner on first use.
USER root
RUN mkdir -p /opt/aip-local && chown airflow:0 /opt/aip-local
# /gcs/ for a trainer, as Vertex AI mounts Cloud Storage: rclone over FUSE, in a mount namespace
# per replica (airflow_aip/local/executor/gcs_mount.py); docker-compose.yaml runs aip-local as root
# with /dev/fuse and SYS_ADMIN for it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends rclone fuse3 \
    && rm -rf /var/lib/apt/lists/*
USER airflow

# .dockerignore lets in only what the package build needs.
COPY --chown=airflow:0 . /opt/airflow-aip/
RUN pins=/opt/airflow-aip/constraints/airflow-${AIRFLOW_VERSION}.txt; \
    if [ "${AIRFLOW_VERSION}" = 3.3.2 ]; then pins=/opt/airflow-aip/constraints.txt; fi; \
    test -f "$pins" || { echo "no pins for Airflow ${AIRFLOW_VERSION}: see docs/airflow-versions.md"; exit 1; }; \
    pip install --no-cache-dir --constraint "$pins" \
        "/opt/airflow-aip[local]" scikit-learn joblib \
    && rm -rf /opt/airflow-aip/build

# The Python of Vertex AI's default training images (3.10: the `.py310` images), which the
# Airflow image lacks: the local training service runs their jobs on it, as Vertex would, and
# fails a job whose image's Python is missing. uv fetches a standalone CPython build once here
# (airflow_aip/local/executor/interpreters.py finds it in uv's install dir).
RUN python -m uv python install 3.10
