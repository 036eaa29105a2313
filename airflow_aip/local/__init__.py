"""A local Google Cloud training service: Vertex AI custom training and ml v1, run on this machine.

``aip-local serve`` (see :mod:`.cli`) starts fake-gcs-server and an HTTP server speaking the
aiplatform v1 ``customJobs``/``hyperparameterTuningJobs`` API and the ml v1 ``projects.jobs``
API, so the Vertex AI SDK, google-api-python-client and TrainingJobHook talk to it as to
Google, with only the endpoint overridden. Jobs run as the
real service runs them: packageUris fetched from the emulated Cloud Storage, pip-installed
into a cached environment, ``python -m <pythonModule>`` per replica or tuning trial.

Where things live:
- :mod:`.api` (the HTTP app: ml v1 and logging v2 routes, errors in Google's shape),
  :mod:`.service` (the ml v1 face over the queue; restart recovery), :mod:`.store` (records on disk);
- ``vertex/``: the aiplatform v1 face (routes, rendering, its jobs over the same executor);
- ``executor/``: one job's lifecycle, plans, environments, replica processes, trials, the tuner;
- ``logs/``: job logs as Cloud Logging entries, their index, the list filters;
- ``storage/``: fake-gcs-server and its fault proxy; :mod:`.faults`: errors on purpose;
- :mod:`.console`: a page per job; :mod:`.cli`: ``aip-local``.

Nothing here imports Airflow: the service starts fast and runs without a scheduler.
"""
