"""Job logs as Cloud Logging serves them: written entries, their index, and the list filters."""
