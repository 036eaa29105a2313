"""Build and push trainer images with this worker's podman or docker: the image operator's only I/O.

The engine's command line is driven, not a client library, so the engine brings what a user's
terminal has: its store, its build cache and its credentials (``docker login``, ``gcloud auth
configure-docker``, podman's auth file). For Artifact Registry and Container Registry the
Airflow connection's identity can log in instead (``gcp_conn_id``): its access token goes into
an auth file of this call's own (``oauth2accesstoken``, as ``gcloud auth print-access-token |
docker login`` does), readable by this user only and deleted after; never into argv, never into the
worker's own engine configuration.

A registry on loopback (the local stand-in for Artifact Registry) is spoken to over plain HTTP.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow_aip.engines import ENGINE_CHOICES, find_engine_binary, ulimits
from airflow_aip.exceptions import ImageBuildError, ValidationError
from airflow_aip.hooks.base import DEFAULT_CONN_ID, GoogleCloudBaseHook
from airflow_aip.hooks.credentials import auth_request
from airflow_aip.image_plan import ImagePlan

BUILD_TIMEOUT_SECONDS = 3600
_OUTPUT_TAIL_LINES = 30
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# What each engine says when the registry has no such repository or tag (not: cannot tell).
_ABSENT = re.compile(r"404|not found|manifest unknown|name unknown|no such manifest", re.IGNORECASE)


def registry_auth(host: str, token: str) -> dict[str, Any]:
    """An engine auth file (docker's config.json, podman's auth.json): ``token`` logs in to ``host``."""
    secret = base64.b64encode(f"oauth2accesstoken:{token}".encode()).decode()
    return {"auths": {host: {"auth": secret}}}


class ContainerImageHook(GoogleCloudBaseHook):
    """One engine (``auto``: podman, then docker) building, asking for and pushing one image at a time.

    :param engine: ``auto``, ``podman`` or ``docker``.
    :param gcp_conn_id: log in to Google's registries as this connection; None: the engine's own
        credentials everywhere.
    """

    def __init__(
        self,
        engine: str = "auto",
        gcp_conn_id: str | None = DEFAULT_CONN_ID,
        *,
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if engine not in ENGINE_CHOICES:
            raise ValidationError("engine", f"must be one of {', '.join(ENGINE_CHOICES)}, got {engine!r}")
        super().__init__(gcp_conn_id or DEFAULT_CONN_ID, impersonation_chain=impersonation_chain, **kwargs)
        self.engine = engine
        self.use_connection = gcp_conn_id is not None
        self._process: subprocess.Popen[str] | None = None

    @cached_property
    def binary(self) -> str:
        found = find_engine_binary(self.engine)
        if found is None:
            wanted = "podman or docker" if self.engine == "auto" else self.engine
            raise ImageBuildError(
                f"no container engine runs on this worker: {wanted} is missing or `info` fails"
            )
        return found

    @property
    def is_podman(self) -> bool:
        return Path(self.binary).name == "podman"

    def _run(
        self, argv: Sequence[str], timeout: float = 600, *, relay: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the engine; ``stop`` from another thread (a killed task) ends it.

        ``relay``: log each line of its output as it comes, after that word (a build's steps, a
        push's layers): the task log shows the work while it happens, not three lines at its end.
        """
        lines: list[str] = []
        with subprocess.Popen(
            [self.binary, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        ) as process:
            self._process = process

            def read() -> None:
                for line in process.stdout or ():
                    lines.append(line)
                    if relay and line.strip():
                        self.log.info("%s: %s", relay, line.rstrip())

            reader = threading.Thread(target=read, name="aip-engine-output", daemon=True)
            reader.start()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            finally:
                reader.join(timeout=30)
                self._process = None
        return subprocess.CompletedProcess(process.args, process.returncode, "".join(lines), "")

    def stop(self) -> None:
        """End the engine command under way (``on_kill``): a build or push is not left running."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    @contextlib.contextmanager
    def _auth(self, plan: ImagePlan) -> Iterator[tuple[list[str], list[str]]]:
        """``(global flags, command flags)``: the login to ``plan``'s registry, plain HTTP on loopback."""
        tls = ["--tls-verify=false"] if self.is_podman and plan.on_loopback else []
        if not (self.use_connection and plan.on_google):
            yield [], tls
            return
        credentials, _ = self.load_credentials()
        credentials.refresh(auth_request())
        with tempfile.TemporaryDirectory(prefix="aip-registry-auth-") as directory:  # mode 0700
            path = Path(directory) / ("auth.json" if self.is_podman else "config.json")
            path.write_text(json.dumps(registry_auth(plan.registry, credentials.token)))
            path.chmod(0o600)
            if self.is_podman:
                yield [], [*tls, "--authfile", str(path)]
            else:
                yield ["--config", directory], tls

    def in_registry(self, plan: ImagePlan) -> bool | None:
        """Whether the registry has ``plan``'s tag; None when it could not be told (the log says why)."""
        with self._auth(plan) as (before, flags):
            if self.is_podman:  # podman 4 cannot inspect a remote manifest over plain HTTP; it lists tags
                argv = [*before, "search", "--list-tags", "--limit", "100000", *flags, plan.repository]
            else:
                argv = [
                    *before,
                    "manifest",
                    "inspect",
                    *(["--insecure"] if plan.on_loopback else []),
                    plan.uri,
                ]
            done = self._run(argv, timeout=120)
        if done.returncode == 0:
            if not self.is_podman:
                return True
            tags = {line.split()[-1] for line in done.stdout.splitlines()[1:] if line.strip()}
            return plan.tag in tags
        if _ABSENT.search(done.stdout):
            return False
        self.log.warning("Could not ask %s for %s: %s", plan.registry, plan.uri, _tail(done.stdout, 3))
        return None

    def has_locally(self, uri: str) -> bool:
        return self._run(["image", "inspect", uri], timeout=60).returncode == 0

    def build(self, plan: ImagePlan) -> None:
        """``<engine> build`` of ``plan``: host networking (the reach the worker has), Vertex's platform."""
        argv = ["build", "--file", str(plan.dockerfile), "--tag", plan.uri, "--platform", plan.platform]
        argv += ["--network", "host", *ulimits(), "--label", f"aip.context={plan.tag}"]
        for name, value in plan.build_args.items():
            argv += ["--build-arg", f"{name}={value}"]
        if plan.target:
            argv += ["--target", plan.target]
        done = self._run([*argv, str(plan.context)], timeout=BUILD_TIMEOUT_SECONDS, relay="build")
        if done.returncode != 0:
            raise self._failed("build", plan, done)

    def push(self, plan: ImagePlan) -> str:
        """Push ``plan``'s image; its manifest digest (``sha256:...``), or "" if the engine did not say."""
        with self._auth(plan) as (before, flags), tempfile.TemporaryDirectory() as scratch:
            digest_file = Path(scratch) / "digest"
            digest_flag = ["--digestfile", str(digest_file)] if self.is_podman else []
            argv = [*before, "push", *flags, *digest_flag, plan.uri]
            done = self._run(argv, timeout=BUILD_TIMEOUT_SECONDS, relay="push")
            said = digest_file.read_text() if digest_file.is_file() else done.stdout
        if done.returncode != 0:
            raise self._failed("push", plan, done)
        found = _DIGEST.search(said)
        return found.group(0) if found else ""

    def _failed(self, verb: str, plan: ImagePlan, done: subprocess.CompletedProcess[str]) -> ImageBuildError:
        name = Path(self.binary).name
        return ImageBuildError(f"{name} {verb} of {plan.uri} exited {done.returncode}:\n{_tail(done.stdout)}")


def _tail(output: str, lines: int = _OUTPUT_TAIL_LINES) -> str:
    return "\n".join(line for line in output.strip().splitlines()[-lines:])
