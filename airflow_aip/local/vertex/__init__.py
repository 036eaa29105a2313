"""The local service's aiplatform v1 face: Vertex AI's routes, how a stored job is answered, its jobs."""
