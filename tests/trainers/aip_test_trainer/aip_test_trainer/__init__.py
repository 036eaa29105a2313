"""Small trainer modules for the local training service's tests (run as ``python -m``)."""
