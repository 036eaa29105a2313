"""What a trainer image is called, decided from its build context alone (pure: no engine, no network).

A custom-container job names its image by URI (``masterConfig.imageUri``, ``containerSpec.imageUri``).
Tagging it ``latest``, or by the run's date, makes a retry or a later run train on whatever was
pushed last. Here the tag is a hash of what the build reads: every file the engine would send
(``.dockerignore`` applied, as the engine applies it), each with its path and executable bit, the
Dockerfile, the build arguments, the target stage and the platform. The same bytes give the same
tag on any worker, so:

- a retry, a rerun or another DAG built from the same context names the same image, and the
  registry is asked first: a tag already there is neither built nor pushed again;
- a changed file gives a new tag, and a job never runs an image other than the one its context
  describes.

What the hash cannot see is what a build fetches (``FROM python:3.11``, ``pip install`` without
pins): pin those by digest or version in the Dockerfile when that matters.

Every argument is checked here, before the engine is touched, each error naming its field.
"""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from airflow_aip.exceptions import ValidationError
from airflow_aip.uris import is_loopback

# Docker's reference grammar (distribution/reference): a registry host[:port], then lowercase path
# components joined by '/', each alphanumerics separated by '.', '_', '__' or dashes.
_HOST = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"^(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*$")
TAG_PREFIX = "ctx-"  # ctx-<hash>: the tag says what it is made of
TAG_HEX = 20  # 80 bits of sha256: no two contexts of one repository collide
# Artifact Registry (REGION-docker.pkg.dev) and Container Registry (gcr.io, REGION.gcr.io): the
# hosts an Airflow connection's Google credentials log in to.
_GOOGLE_REGISTRY = re.compile(r"^(?:[a-z0-9-]+-docker\.pkg\.dev|(?:[a-z]+\.)?gcr\.io)$")
PLATFORMS = ("linux/amd64",)  # Vertex AI's machines; an arm64 laptop's default would not run there


@dataclass(frozen=True)
class ImagePlan:
    """One image to build and push: where from, and the content-addressed name it gets."""

    repository: str
    tag: str
    context: Path
    dockerfile: Path
    build_args: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    platform: str = PLATFORMS[0]

    @property
    def uri(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def registry(self) -> str:
        """The registry's host[:port] (``docker.io`` for a name without one, as the engines read it)."""
        first, slash, _ = self.repository.partition("/")
        has_host = slash and ("." in first or ":" in first or first == "localhost")
        return first if has_host else "docker.io"

    @property
    def on_loopback(self) -> bool:
        """A registry on this machine (the local stand-in for Artifact Registry): plain HTTP."""
        return is_loopback(self.registry)

    @property
    def on_google(self) -> bool:
        """Artifact Registry or Container Registry: the connection's credentials log in to it."""
        return bool(_GOOGLE_REGISTRY.match(self.registry))


def plan_image(
    context: str | Path,
    repository: str,
    *,
    dockerfile: str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    platform: str = PLATFORMS[0],
) -> ImagePlan:
    """The image ``context`` builds, named ``repository:ctx-<hash>``; every argument checked first."""
    repository = check_repository(repository)
    root = Path(context)
    if not root.is_dir():
        raise ValidationError("context_path", f"must be a directory holding the build context; {root} is not")
    recipe = _dockerfile(root, dockerfile)
    args = _build_args(build_args)
    if target is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", str(target)):
        raise ValidationError(
            "target", f"must name a build stage (letters, digits, '_', '.', '-'); got {target!r}"
        )
    if platform not in PLATFORMS:
        raise ValidationError(
            "platform", f"must be one of {', '.join(PLATFORMS)} (Vertex AI's machines); got {platform!r}"
        )
    tag = TAG_PREFIX + context_digest(root, recipe, args, target, platform)[:TAG_HEX]
    return ImagePlan(repository, tag, root, recipe, args, target, platform)


def check_repository(repository: str, field_name: str = "repository") -> str:
    """``repository`` if it is an image name without tag or digest (the tag is ours to give)."""
    if not isinstance(repository, str) or not repository:
        raise ValidationError(
            field_name, "must name the image's repository, e.g. REGION-docker.pkg.dev/PROJECT/REPO/NAME"
        )
    if "@" in repository or ":" in repository.rsplit("/", 1)[-1]:
        raise ValidationError(
            field_name,
            f"must not carry a tag or digest: the tag is derived from the build context; got {repository!r}",
        )
    if not REPOSITORY.match(repository):
        raise ValidationError(
            field_name,
            "must be an image name: [host[:port]/]path, path components of lowercase letters and digits "
            f"separated by '.', '_' or '-'; got {repository!r}",
        )
    return repository


def _dockerfile(root: Path, dockerfile: str) -> Path:
    recipe = (root / dockerfile).resolve()
    if not recipe.is_file():
        raise ValidationError(
            "dockerfile", f"must be a file (relative to context_path); {root / dockerfile} is not"
        )
    return recipe


def _build_args(build_args: Mapping[str, str] | None) -> dict[str, str]:
    if build_args is None:
        return {}
    if not isinstance(build_args, Mapping):
        raise ValidationError(
            "build_args", f"must be a mapping of names to strings, got {type(build_args).__name__}"
        )
    for name, value in build_args.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValidationError(
                f"build_args.{name}", "must be a build argument's name (letters, digits, '_')"
            )
        if not isinstance(value, str):
            raise ValidationError(f"build_args.{name}", f"must be a string, got {type(value).__name__}")
    return dict(sorted(build_args.items()))


def context_digest(
    root: Path, dockerfile: Path, build_args: Mapping[str, str], target: str | None, platform: str
) -> str:
    """sha256 over what the build reads: the recipe, its arguments, and each file sent, in path order."""
    digest = hashlib.sha256()
    for part in (dockerfile.read_bytes(), repr(sorted(build_args.items())).encode(), str(target).encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    digest.update(platform.encode())
    for relative, path in context_files(root):
        executable = bool(path.lstat().st_mode & stat.S_IXUSR)
        content = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
        header = f"\0{relative}\0{int(executable)}\0{len(content)}\0".encode()
        digest.update(header + content)
    return digest.hexdigest()


def context_files(root: Path) -> Iterator[tuple[str, Path]]:
    """``(posix path, path)`` of each file the engine sends from ``root``, sorted; ``.dockerignore`` kept."""
    rules = ignore_rules(root / ".dockerignore")
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if (path.is_file() or path.is_symlink()) and not ignored(relative, rules):
            yield relative, path


def ignore_rules(path: Path) -> list[tuple[bool, str]]:
    """``.dockerignore``'s patterns in order, each ``(is_exception, cleaned pattern)``."""
    if not path.is_file():
        return []
    rules = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = str(PurePosixPath(line.removeprefix("!").strip().lstrip("/")))
        rules.append((exception, pattern))
    return rules


def ignored(relative: str, rules: Sequence[tuple[bool, str]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent directories decides."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for exception, pattern in rules:
        if any(_match(pattern, prefix) for prefix in prefixes):
            verdict = not exception
    return verdict


def _match(pattern: str, path: str) -> bool:
    """Go's filepath.Match per component (``*`` and ``?`` stop at '/'), plus ``**`` for any depth."""
    pieces = pattern.split("/")
    regex = ""
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        if piece == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _component_regex(piece) + ("" if last else "/")
    return re.fullmatch(regex, path) is not None


def _component_regex(piece: str) -> str:
    out, i = "", 0
    while i < len(piece):
        char = piece[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "\\" and i + 1 < len(piece):
            i += 1
            out += re.escape(piece[i])
        elif char == "[" and "]" in piece[i + 1 :]:
            end = piece.index("]", i + 1)
            body = piece[i + 1 : end]
            out += "[" + ("^" + body[1:] if body.startswith(("!", "^")) else body).replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out
