"""A local AI Platform Training service: the ml v1 jobs API, run on this machine.

``aip-local serve`` (see :mod:`.cli`) starts fake-gcs-server and an HTTP server speaking the
ml v1 ``projects.jobs`` API (create, get, list, cancel), so google-api-python-client and
TrainingJobHook talk to it as to Google, with only the endpoint overridden. Jobs run as the
real service runs them: packageUris fetched from the emulated Cloud Storage, pip-installed
into a cached environment, ``python -m <pythonModule>`` per replica or tuning trial.

Modules: :mod:`.api` (HTTP), :mod:`.service` (queue, restart recovery), :mod:`.execution`
(one job's lifecycle), :mod:`.runner` (replica processes and their environment),
:mod:`.trials` and :mod:`.tuning` (hyperparameter tuning with optuna), :mod:`.environments`
(package cache), :mod:`.store` and :mod:`.logs` (records and logs on disk), :mod:`.gcs`.

Nothing here imports Airflow: the service starts fast and runs without a scheduler.
"""
