"""Vertex AI custom training (aiplatform v1): its bodies, enums, machine tables, study specs, view.

Everything here speaks Vertex's wire format; the rest of the model reads it through the
:class:`~airflow_aip.jobs.backend.Backend` object that this package defines.
"""
