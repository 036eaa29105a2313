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

.PHONY: install job-pythons google-env compat-envs test-compat lock-compat lint docs deps base-image prepare browser gcs-fuse servers screenshot test test-tiers test-soak test-e2e test-unit test-integration test-dags test-celery demo ui bench reliability lock clean

install: $(STAMP) $(BYTECODE)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python >= 3.11 is required (the pinned tools need it; the package itself runs on 3.10)"; exit 1; }
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

# The Google provider's own environment (about 1.8 GB, so never in .venv: it is not a dependency, and
# it would add seconds to every DAG parse): apache-airflow-providers-google 22.8.0 beside this
# package, pinned by constraints-google.txt (`make lock`). `make test-soak` runs the provider's
# Vertex AI operators against the local service there.
GOOGLE_VENV := .venv-google
GOOGLE_STAMP := $(GOOGLE_VENV)/.installed-stamp

google-env: $(GOOGLE_STAMP)

$(GOOGLE_STAMP): $(STAMP) constraints-google.txt
	$(BIN)/uv venv --quiet --allow-existing --python $(BIN)/python $(GOOGLE_VENV)
	$(BIN)/uv pip install --quiet --python $(GOOGLE_VENV)/bin/python --constraint constraints-google.txt -e ".[local,dev]" apache-airflow-providers-google
	touch $@

# The compat tier's cores (docs/airflow-versions.md): one cached virtualenv per Airflow core,
# .venv-airflow-<core>, pinned by constraints/airflow-<core>.txt (resolved from `apache-airflow==<core>`
# plus this package by uv, preferring constraints.txt's versions: `make lock-compat`). `make test` stays
# on .venv's core (constraints.txt); `make test-soak` runs the unit and DAG tiers and one standalone
# pipeline on each of these (3.0.6 is below the floor: docs/airflow-versions.md).
COMPAT_CORES := 3.1.8 3.2.2 3.4.0b2
COMPAT_STAMPS := $(foreach core,$(COMPAT_CORES),.venv-airflow-$(core)/.installed-stamp)

compat-envs: $(COMPAT_STAMPS)

.venv-airflow-%/.installed-stamp: $(STAMP) constraints/airflow-%.txt
	$(BIN)/uv venv --quiet --seed --allow-existing --python $(BIN)/python .venv-airflow-$*
	$(BIN)/uv pip install --quiet --python .venv-airflow-$*/bin/python --constraint constraints/airflow-$*.txt -e ".[local,dev]"
	.venv-airflow-$*/bin/python -m compileall -q -j 0 $$(.venv-airflow-$*/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') >/dev/null || true
	touch $@

# The docs site (docs/, MyST Markdown and autodoc) into build/docs/html. Warnings are errors and
# every cross-reference must resolve (-n), so a broken link, a malformed docstring or a docstring
# naming what no longer exists fails `make lint`. -E: a fresh read each time, so a warning is
# never hidden by a page an earlier build left unchanged.
SPHINX_BUILD := $(BIN)/sphinx-build -W --keep-going -n -E -q -b html docs build/docs/html

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(SPHINX_BUILD)

docs: install
	$(SPHINX_BUILD)
	@echo "The docs: build/docs/html/index.html"

# Debian packages, each installed when missing and we are root (else the tests that need it skip;
# under CI both this step and those tests fail instead: tests/fixtures/tools.py):
# chromium (UI tests, through playwright: never `playwright install`), postgresql and redis-server
# (the e2e and Celery tiers' own servers), rclone and fuse3 (/gcs/ in each training replica), curl
# (Google's images have it, and the test trainer calls it), and
# docker-compose (validates docker-compose.yaml offline), and podman, mmdebstrap and
# docker-registry (custom-container jobs). One `apt-get update` for all of them.
deps:
	@bash scripts/debian_deps.sh browser servers fuse tools compose containers

# The Pythons of Vertex AI's prebuilt images (3.10 for most): the local service runs a job on its
# image's Python and refuses it where this machine has none (docs/local-service.md, "Runtimes"). It
# looks on PATH, in pyenv and in uv's store; where none has it, uv installs one (a download from
# python-build-standalone's releases). Without it, a note; under CI a failure, as for a missing tool.
JOB_PYTHONS := 3.10
job-pythons: install
	@for minor in $(JOB_PYTHONS); do \
	  $(BIN)/python -c "import sys; from airflow_aip.local.executor.interpreters import find_python; sys.exit(find_python('$$minor') is None)" \
	    && continue; \
	  echo "uv python install $$minor (the jobs of images on Python $$minor)"; \
	  $(BIN)/uv python install $$minor && continue; \
	  case "$$(printf %s "$${CI:-}" | tr '[:upper:]' '[:lower:]')" in \
	    ""|0|false|no|off) echo "note: no Python $$minor here, and uv could not install one: jobs on its images fail";; \
	    *) echo "job-pythons: CI=$$CI and no Python $$minor here (PATH, pyenv, uv), and uv could not install one" >&2; exit 1;; \
	  esac; \
	done

# The trainer base image of custom-container jobs and their tests, built from Debian's packages
# once per machine and kept in the engine's store (scripts/base_image.sh; a no-op once built).
base-image: deps
	@bash scripts/base_image.sh

gcs-fuse:
	@bash scripts/debian_deps.sh fuse

browser:
	@bash scripts/debian_deps.sh browser

# Rewrites docs/training-job-tab.png (the README's screenshot) from a real Airflow and pipeline run.
screenshot: install browser
	AIP_WRITE_SCREENSHOTS=1 $(BIN)/pytest tests/e2e/test_ui.py -k training_job_tab

# `make test` proves every behaviour once; `make test-soak` holds the repeats and the load (the
# `soak` marker): CI runs both. Most tests wait on servers and training processes rather than the
# CPU, so TEST_WORKERS pytest-xdist workers share the two cores; a module stays whole on one
# worker (its module fixtures start once). The e2e tier's one Airflow is shared by every worker
# (tests/e2e/stack.py), so its modules come first, in collection order, and spread over the
# workers. Each run prints and keeps its CPU-seconds per module (.pytest_cache/v/aip/cpu-seconds).
TEST_WORKERS ?= 4
TESTS := tests/e2e tests/dags tests/integration tests/celery tests/unit
# runs only in the Google provider's environment (google-env)
GOOGLE_PROVIDER_TESTS := tests/integration/test_google_provider_operators.py
PYTEST = $(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=20 --ignore $(GOOGLE_PROVIDER_TESTS)

# install beside the Debian packages and then the base image (network beside CPU)
prepare:
	@$(MAKE) --no-print-directory -j2 install base-image
	@$(MAKE) --no-print-directory job-pythons

# lint beside the tests: the tests wait on servers and training processes more than they use
# both cores (about 1.3 of 2 on average), so lint's minute of CPU fits beside them. The tests start
# once installed and the Debian packages are there. The base image (minutes on a new machine) builds
# meanwhile, in the background: only the container tests need it, and they wait for it
# (scripts/base_image.sh holds a machine-wide lock). A failed build, lint or test fails it.
test:
	@$(MAKE) --no-print-directory -j2 lint test-tiers

BASE_IMAGE_LOG := .pytest_cache/base-image.log
test-tiers: install deps job-pythons
	@mkdir -p $(dir $(BASE_IMAGE_LOG)); bash scripts/base_image.sh >$(BASE_IMAGE_LOG) 2>&1 & build=$$!; \
	$(PYTEST) -m "not soak" $(TESTS); status=$$?; \
	if wait $$build; then sed -n '$$p' $(BASE_IMAGE_LOG); else cat $(BASE_IMAGE_LOG); status=1; fi; \
	exit $$status

test-soak: prepare google-env
	$(PYTEST) -m soak $(TESTS)
	$(GOOGLE_VENV)/bin/pytest -m soak $(GOOGLE_PROVIDER_TESTS)
	@$(MAKE) --no-print-directory test-compat

# The compat tier (issue 51; the end of test-soak, so CI runs it): on each core of COMPAT_CORES, the
# unit and DAG tiers (tests/fixtures/in_process_api.py keeps dag.test()'s in-process API started on
# 3.1 and 3.2), then on one `airflow standalone`
# the race test's run (three deferrable tasks whose jobs end 0.5 to 3 s after the deferral: defer,
# trigger, hold, end as the job did: success, failure, a ladder's climb) and the user-kill test (a kill that cancels the job; on a core without
# BaseTrigger.on_kill, the deferred kills leave their jobs running and the tasks said so). The cores run
# one after another (2 cores; each run's xdist workers use both); a failing core fails, and every core
# runs first. `airflow` is launched by name, so each core's bin/ leads PATH.
COMPAT_E2E := -m "not soak" tests/e2e/test_deferral_race.py tests/e2e/test_standalone.py::test_user_kill_cancels_the_job_in_every_waiting_mode
test-compat: prepare compat-envs
	@failed=""; for core in $(COMPAT_CORES); do \
	  venv=$(CURDIR)/.venv-airflow-$$core; echo "== compat tier: Airflow $$core"; start=$$(date +%s); \
	  env -u AIP_TEST_SHARED_DIR PATH=$$venv/bin:$$PATH $$venv/bin/pytest -n 2 -p no:cacheprovider -q -m "not soak" tests/unit tests/dags \
	    && env -u AIP_TEST_SHARED_DIR PATH=$$venv/bin:$$PATH $$venv/bin/pytest -p no:cacheprovider -q $(COMPAT_E2E) \
	    || failed="$$failed $$core"; \
	  echo "== compat tier: Airflow $$core took $$(( $$(date +%s) - start )) s"; \
	done; if [ -n "$$failed" ]; then echo "compat tier failed on Airflow$$failed"; exit 1; fi

# Re-resolve each compat core's pins: `apache-airflow==<core>` plus this package, preferring
# constraints.txt's versions (uv reads an existing output file as its preferences).
COMPAT_PINNED := 3.1.8 3.2.2 3.4.0b2
lock-compat:
	@for core in $(COMPAT_PINNED); do \
	  grep -v -E '^apache-airflow(-core|-task-sdk)?==' constraints.txt > constraints/airflow-$$core.txt; \
	  printf -- '-e file://$(CURDIR)#egg=airflow-aip[local,dev]\napache-airflow==%s\nuv==$(UV_VERSION)\n' $$core \
	    | $(BIN)/uv pip compile --quiet --python-version 3.11 --prerelease if-necessary-or-explicit \
	      --no-header --no-annotate -o constraints/airflow-$$core.txt - ; \
	  sed -i '/^-e /d' constraints/airflow-$$core.txt; \
	done

test-e2e: prepare
	$(PYTEST) -m "not soak" tests/e2e

test-unit: install
	$(BIN)/pytest tests/unit

test-integration: install
	$(BIN)/pytest -m "not soak" tests/integration --ignore $(GOOGLE_PROVIDER_TESTS)

test-dags: install
	$(BIN)/pytest -m "not soak" tests/dags

test-celery: prepare
	$(BIN)/pytest tests/celery

# Debian's PostgreSQL (and Redis): the metadata DB of `make demo` and `make ui` is a PostgreSQL
# cluster of their home's own (scripts/postgres.py); SQLite where it cannot be installed.
servers:
	@bash scripts/debian_deps.sh servers

demo: install gcs-fuse servers job-pythons
	$(BIN)/python scripts/demo.py

# DEMO=1: Airflow on the last `make demo`'s home, to see that run's trials in the UI.
# GOOGLE_CLIENTS=1: Airflow's processes get `aip-local env`'s variables, so Google's own clients
# (the Google provider's Vertex AI operators, where installed; the SDK on gRPC) reach the service.
# Stopped by Ctrl-C or SIGTERM to make's process group (make forwards the SIGTERM, so ui.py gets
# it twice): ui.py stops everything it started on the first signal and defers any other.
ui: install gcs-fuse base-image job-pythons
	$(BIN)/python scripts/ui.py $(if $(DEMO),--demo) $(if $(GOOGLE_CLIENTS),--google-clients)

bench: install gcs-fuse
	$(BIN)/python -m bench.run

# Faults, crashes, kills, bad input, security and staging races, many times; rewrites RELIABILITY.md's table.
reliability: install
	$(BIN)/python scripts/reliability.py --runs 20 --write

lock:
	$(BIN)/uv pip freeze --python $(BIN)/python --exclude-editable | grep -v -E '^(uv|pip)==' > constraints.txt
	$(BIN)/uv pip freeze --python $(GOOGLE_VENV)/bin/python --exclude-editable | grep -v -E '^(uv|pip)==' > constraints-google.txt

clean:
	rm -rf $(VENV) $(GOOGLE_VENV) .venv-airflow-* .airflow .airflow-ui .aip-local build *.egg-info .pytest_cache .mypy_cache .ruff_cache
