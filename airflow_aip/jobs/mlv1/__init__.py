"""AI Platform Training (ml v1): ``trainingInput``, its hyperparameter spec, its diff and its view.

Everything here speaks ml v1's wire format; the rest of the model reads it through the
:class:`~airflow_aip.jobs.backend.Backend` object that this package defines.
"""
