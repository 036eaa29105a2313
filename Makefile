# Everything installs from nothing on a machine with only Python 3.10+, make and the package
# registries. Versions are pinned by constraints.txt (regenerate with `make lock`).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed-stamp
BYTECODE := $(VENV)/.bytecode-stamp
# `airflow standalone` and `airflow dags test` launch `airflow` by name.
export PATH := $(BIN):$(PATH)

.PHONY: install lint compose-validator browser test-servers gcs-fuse screenshot test test-unit test-integration test-dags test-celery demo ui bench reliability lock clean

install: $(STAMP) $(BYTECODE)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "Python >= 3.10 is required"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(BIN)/uv pip install --quiet --python $(BIN)/python --constraint constraints.txt -e ".[local,dev,celery]"
	touch $@

# Every Airflow task is a new Python process that imports Airflow, SQLAlchemy, google-cloud-*...
# With PYTHONDONTWRITEBYTECODE set (as in many CI and container images) nothing is ever cached, so
# each task compiled ~1,300 modules from source: seconds per task on 2 cores. Compile them once.
$(BYTECODE): $(STAMP)
	$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') >/dev/null || true
	touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The compose file is validated without an engine (there is none here): Debian's docker-compose
# runs `config` offline. Installed when missing and we are root; otherwise that one test skips.
compose-validator:
	@if command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; \
	else echo "note: no docker compose CLI; the compose schema test will skip"; fi

# The UI tests drive Debian's chromium through the playwright package (a dev dependency). Never
# `playwright install`: it downloads browsers from a CDN. Installed when missing and we are root;
# otherwise the browser tests skip.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; \
	else echo "note: no chromium; the browser tests will skip"; fi

# The e2e and Celery tiers run Debian's PostgreSQL (and the Celery tier Redis) as their own
# processes (own data dirs, loopback, stopped by PID). Installed when missing and we are root;
# otherwise the Celery tier skips and the e2e tier keeps Airflow's metadata in SQLite.
test-servers:
	@if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && command -v redis-server >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null; \
	else echo "note: no postgresql or redis-server; the Celery tier will skip, the e2e tier runs on SQLite"; fi

# The local service mounts Cloud Storage at /gcs/ in each Vertex AI replica, as Vertex does, with
# Debian's rclone (FUSE) in a mount namespace of the replica's own. Installed when missing and we
# are root; otherwise jobs run without /gcs/ and their log says so.
gcs-fuse:
	@if command -v rclone >/dev/null 2>&1 && command -v fusermount3 >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rclone fuse3 >/dev/null; \
	else echo "note: no rclone/fuse3; trainers will not see /gcs/"; fi

# Rewrites docs/training-job-tab.png (the README's screenshot) from a real Airflow and pipeline run.
screenshot: install browser
	AIP_WRITE_SCREENSHOTS=1 $(BIN)/pytest tests/e2e/test_ui.py -k training_job_tab

# One pytest run over the five tiers, so its closing line counts them all (e2e: airflow standalone;
# celery: CeleryExecutor with two workers that share no disk). Most tests wait on servers and
# training processes rather than the CPU, so TEST_WORKERS pytest-xdist workers share the two
# cores; a module, the e2e tier and the Celery tier each stay whole on one worker (tests/conftest.py).
# The longest scopes start first, by the seconds measured in tests/conftest.py; the short ones fill in.
TEST_WORKERS ?= 4
test: lint compose-validator browser test-servers gcs-fuse
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --durations=20 tests/e2e tests/celery tests/dags tests/integration tests/unit

test-unit: install
	$(BIN)/pytest tests/unit

test-integration: install
	$(BIN)/pytest tests/integration

test-dags: install
	$(BIN)/pytest tests/dags

test-celery: install test-servers
	$(BIN)/pytest tests/celery

demo: install gcs-fuse
	$(BIN)/python scripts/demo.py

# DEMO=1: Airflow on the last `make demo`'s home, to see that run's trials in the UI.
# Stopped by Ctrl-C or SIGTERM to make's process group (make forwards the SIGTERM, so ui.py gets
# it twice): ui.py stops everything it started on the first signal and defers any other.
ui: install gcs-fuse
	$(BIN)/python scripts/ui.py $(if $(DEMO),--demo)

bench: install gcs-fuse
	$(BIN)/python -m bench.run

# Faults, crashes, kills, bad input, security and staging races, many times; rewrites RELIABILITY.md's table.
reliability: install
	$(BIN)/python scripts/reliability.py --runs 20 --write

lock:
	$(BIN)/uv pip freeze --python $(BIN)/python --exclude-editable | grep -v -E '^(uv|pip)==' > constraints.txt

clean:
	rm -rf $(VENV) .airflow .airflow-ui .aip-local build *.egg-info .pytest_cache .mypy_cache .ruff_cache
