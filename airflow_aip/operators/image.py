"""Build a custom container's trainer image inside a DAG, name it by its content, push it once.

The custom-container workflow by hand (write a Dockerfile, ``docker build``, ``docker push``, then
submit a job with ``masterConfig.imageUri``) as one task whose XCom is the image URI, ready for
the submit operator::

    image = BuildTrainerImageOperator(
        task_id="build_image",
        context_path="/opt/airflow/dags/trainers/my_trainer",
        repository="us-central1-docker.pkg.dev/my-project/trainers/my-trainer",
    )
    SubmitTrainingJobOperator(..., training_input={"masterConfig": {"imageUri": image.output}, ...})

The tag is ``ctx-<hash>`` of what the build reads (:mod:`airflow_aip.image_plan`): the same bytes
give the same tag on any worker, so a retry or a rerun trains on exactly the image its context
describes. The registry is asked first: a tag already there is neither built nor pushed again. A
registry that cannot be asked is not a failure: the image is built (the engine's cache makes a
rebuild cheap) and pushed, which rewrites the same content under the same tag.

The worker's podman or docker does the work, with its credentials; for Artifact Registry the
connection's identity logs in (:class:`~airflow_aip.hooks.images.ContainerImageHook`). Every
argument is checked before the engine is touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_aip.image_plan import PLATFORMS, plan_image
from airflow_aip.operators.connected import GoogleOperator


class BuildTrainerImageOperator(GoogleOperator):
    """Build ``context_path`` as ``repository:ctx-<hash>``, push it unless it is there; return its URI.

    :param context_path: the build context: a directory holding the Dockerfile and what it copies.
    :param repository: the image's name without a tag: ``REGION-docker.pkg.dev/PROJECT/REPO/NAME`` on
        Google Cloud, ``localhost:PORT/NAME`` for a registry on this machine.
    :param dockerfile: the Dockerfile's path, relative to ``context_path``.
    :param build_args: ``--build-arg`` values (part of the tag's hash).
    :param target: the build stage to stop at.
    :param platform: the image's platform: Vertex AI's ``linux/amd64`` (the default on any worker,
        so an arm64 worker does not push an image Vertex AI cannot run).
    :param push: push to ``repository``'s registry (False: build into the worker's engine only, for
        a training service on the same machine).
    :param engine: ``auto`` (podman, then docker), ``podman`` or ``docker``.
    :param gcp_conn_id: the connection whose identity logs in to Artifact Registry or Container
        Registry; None: the engine's own credentials (``gcloud auth configure-docker``).
    :param impersonation_chain: a service account to impersonate for that login.
    """

    template_fields: Sequence[str] = (
        "context_path",
        "repository",
        "dockerfile",
        "build_args",
        "target",
        "engine",
        "gcp_conn_id",
        "impersonation_chain",
    )
    template_fields_renderers = {"build_args": "json"}
    ui_color = "#e8f0fe"

    def __init__(
        self,
        *,
        context_path: str,
        repository: str,
        dockerfile: str = "Dockerfile",
        build_args: Mapping[str, str] | None = None,
        target: str | None = None,
        platform: str = PLATFORMS[0],
        push: bool = True,
        engine: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.context_path = context_path
        self.repository = repository
        self.dockerfile = dockerfile
        self.build_args = build_args
        self.target = target
        self.platform = platform
        self.push = push
        self.engine = engine
        self._hook: Any = None

    def execute(self, context: Context) -> str:
        from airflow_aip.hooks.images import ContainerImageHook

        plan = plan_image(
            self.context_path,
            self.repository,
            dockerfile=self.dockerfile,
            build_args=self.build_args,
            target=self.target,
            platform=self.platform,
        )
        self._hook = hook = ContainerImageHook(
            self.engine, self.gcp_conn_id, impersonation_chain=self.impersonation_chain
        )
        self.log.info("The image of %s is %s (a hash of its build context)", plan.context, plan.uri)
        if self.push:
            present = hook.in_registry(plan)
            if present:
                self.log.info("%s is in its registry already: nothing to build or push", plan.uri)
                return plan.uri
            if present is None:
                self.log.info("Building and pushing anyway: the tag names this content, so nothing is lost")
        if hook.has_locally(plan.uri):
            self.log.info("%s was built on this worker before: not built again", plan.uri)
        else:
            hook.build(plan)
            self.log.info("Built %s with %s", plan.uri, hook.binary)
        if self.push:
            digest = hook.push(plan)
            self.log.info("Pushed %s%s", plan.uri, f" ({digest})" if digest else "")
        return plan.uri

    def on_kill(self) -> None:
        """A killed task leaves no build or push running."""
        if self._hook is not None:
            self._hook.stop()
