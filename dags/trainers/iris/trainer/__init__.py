"""Example AI Platform Training application: iris classification with scikit-learn."""
