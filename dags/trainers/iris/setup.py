"""The example trainer package, in the layout Google's AI Platform Training samples use.

``python setup.py sdist`` (or airflow_aip's packaging step) builds the tarball the training job
installs with pip; install_requires names what the training runtime must provide.
"""

from setuptools import find_packages, setup

REQUIRED_PACKAGES = [
    "scikit-learn>=1.0",
    "joblib>=1.0",
    "numpy>=1.20",
    "cloudml-hypertune>=0.1.0.dev6",
    "google-cloud-storage>=2.0",
]

setup(
    name="iris-trainer",
    version="0.1.0",
    install_requires=REQUIRED_PACKAGES,
    packages=find_packages(),
    include_package_data=True,
    python_requires=">=3.10",
    description="Example AI Platform Training application: iris classification with scikit-learn.",
)
