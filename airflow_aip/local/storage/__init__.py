"""Cloud Storage on this machine: fake-gcs-server as a process, and the proxy that injects its faults."""
