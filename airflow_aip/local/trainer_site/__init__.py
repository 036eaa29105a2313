"""What every replica's Python runs at start-up: this directory is first on the replica's ``PYTHONPATH``.

It holds only :mod:`sitecustomize` (so a trainer can import nothing else of ours from it); see
:mod:`airflow_aip.local.executor.trainer_io`.
"""
