"""A local Google Cloud training service: Vertex AI custom training and ml v1, run on this machine.

``aip-local serve`` (see :mod:`.cli`) starts fake-gcs-server and an HTTP server speaking the
aiplatform v1 ``customJobs``/``hyperparameterTuningJobs`` API and the ml v1 ``projects.jobs``
API, so the Vertex AI SDK, google-api-python-client and TrainingJobHook talk to it as to
Google, with only the endpoint overridden. Jobs run as the
real service runs them: packageUris fetched from the emulated Cloud Storage, pip-installed
into a cached environment, ``python -m <pythonModule>`` per replica or tuning trial.

Modules: :mod:`.api` (HTTP), :mod:`.service` (queue, restart recovery), :mod:`.execution`
(one job's lifecycle), :mod:`.runner` (replica processes and their environment),
:mod:`.trials` and :mod:`.tuning` (hyperparameter tuning with optuna), :mod:`.plans` (what the
one executor runs, from either API's job), :mod:`.vertex_api`, :mod:`.vertex_service` and
:mod:`.vertex_render` (the aiplatform v1 face), :mod:`.environments`
(package cache), :mod:`.store` and :mod:`.logs` (records and logs on disk; :mod:`.log_index`
and :mod:`.filter_pruning` answer a poller's many-job lists and log reads without full scans),
:mod:`.gcs`.

Nothing here imports Airflow: the service starts fast and runs without a scheduler.
"""
