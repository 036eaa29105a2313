# The image docker-compose.yaml runs: the official Airflow 3 image plus airflow_aip.
#
# It installs `.[local]` (the operators and the local training service) with the repository's
# constraints.txt, the versions the test suite runs against, and the example trainer's
# dependencies, so the local training service installs trainer packages without a package index.
# The Airflow version of the base image must match apache-airflow's pin in constraints.txt.
ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_IMAGE}

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
RUN pip install --no-cache-dir --constraint /opt/airflow-aip/constraints.txt \
        "/opt/airflow-aip[local]" scikit-learn joblib \
    && rm -rf /opt/airflow-aip/build

# The Python of Vertex AI's default training images (3.10: the `.py310` images), which the
# Airflow image lacks: the local training service runs their jobs on it, as Vertex would, and
# fails a job whose image's Python is missing. uv fetches a standalone CPython build once here
# (airflow_aip/local/executor/interpreters.py finds it in uv's install dir).
RUN python -m uv python install 3.10
