"""``/gcs/BUCKET/...`` for a trainer, as Vertex AI mounts Cloud Storage with Cloud Storage FUSE.

Vertex AI mounts every bucket the job may read at ``/gcs/`` and recommends it to trainers: "custom
training jobs can access your Cloud Storage buckets as subdirectories of the root /gcs directory"
(https://cloud.google.com/vertex-ai/docs/training/cloud-storage-file-system). Here each replica runs in a
mount namespace of its own (``unshare --mount``, which needs root), where rclone (Debian's
package: a well-kept FUSE client with a Cloud Storage backend) mounts the local Cloud Storage at
``/gcs``. Nothing outside the replica sees the mount, and it ends with the replica: the replica's
process group holds rclone, so a stop or a kill takes both.

rclone runs with ``--vfs-cache-mode off``: a file is uploaded while it is written and ``close()``
returns once the object exists, as Cloud Storage FUSE uploads on close. Directories are implicit
(object name prefixes), as with Cloud Storage FUSE's ``--implicit-dirs`` [U] unverified: that
Vertex AI mounts with implicit directories.

Where this cannot work (not root, no ``/dev/fuse``, rclone or ``unshare`` missing), the replica
runs unwrapped and :func:`mount_unavailable` says why, once per job, in the job's log.

Where it should work but the mount fails (rclone exits, or ``/gcs`` is not a mount point within
10 s), the trainer does not run: its ``/gcs/`` writes would land on this machine's disk and the job
would succeed with nothing in Cloud Storage. The replica exits 1 and leaves
:data:`FAILED_MARKER` beside its mount log; :func:`mount_failure` turns that into the job's error
message, and the mount log's last lines go to the job's log. [U] unverified: Vertex AI's message
when Cloud Storage FUSE fails to mount; a job fails there too.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

MOUNT_POINT = Path("/gcs")
LOG_NAME = "gcs-mount.log"  # in the replica's working directory
FAILED_MARKER = "gcs-mount.failed"  # beside it, when the mount failed and the trainer never ran
# Start rclone, wait for the mount, run the trainer, unmount; exit as the trainer did (a signal
# death is passed on as the same signal, so the replica's status reads as on Vertex). A mount that
# fails stops here: the trainer never runs.
_SCRIPT = r"""
log=$1; url=$2; rclone_bin=$3; dir=$4; shift 4
"$rclone_bin" mount :gcs: "$dir" --gcs-endpoint "$url/storage/v1/" --gcs-anonymous --gcs-project-number 0 \
  --gcs-bucket-policy-only --vfs-cache-mode off --dir-cache-time 1s --poll-interval 0 \
  --log-file "$log" --log-level NOTICE &
rclone=$!
i=0
until mountpoint -q "$dir"; do
  i=$((i + 1))
  if [ "$i" -gt 200 ] || ! kill -0 "$rclone" 2>/dev/null; then
    echo "aip-local: /gcs/ could not be mounted, the trainer was not started (see $log):" >&2
    tail -n 5 "$log" >&2 2>/dev/null
    kill "$rclone" 2>/dev/null; wait "$rclone" 2>/dev/null
    fusermount3 -u "$dir" 2>/dev/null || fusermount -u "$dir" 2>/dev/null
    : > "${log%/*}/gcs-mount.failed"; exit 1
  fi
  sleep 0.05
done
"$@"
rc=$?
fusermount3 -u "$dir" 2>/dev/null || fusermount -u "$dir" 2>/dev/null
kill "$rclone" 2>/dev/null; wait "$rclone" 2>/dev/null
if [ "$rc" -gt 128 ]; then trap - "$((rc - 128))" 2>/dev/null; kill "-$((rc - 128))" $$; fi
exit "$rc"
"""


@functools.cache
def mount_unavailable() -> str | None:
    """Why ``/gcs/`` cannot be mounted on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "/gcs/ is not mounted: a mount namespace per replica needs root"
    if not Path("/dev/fuse").exists():
        return "/gcs/ is not mounted: this machine has no /dev/fuse"
    missing = [tool for tool in ("unshare", "rclone", "mountpoint") if shutil.which(tool) is None]
    if missing:
        return f"/gcs/ is not mounted: {', '.join(missing)} not found (make installs rclone and fuse3)"
    try:
        MOUNT_POINT.mkdir(exist_ok=True)
    except OSError as exc:
        return f"/gcs/ is not mounted: cannot create {MOUNT_POINT}: {exc}"
    return None


def mount_failure(work_dir: Path) -> str | None:
    """Why the replica whose working directory is ``work_dir`` never ran its trainer, or None.

    rclone's last log lines say what went wrong; they go into the job's error message, because
    the failure is the platform's, not the trainer's.
    """
    if not (work_dir / FAILED_MARKER).exists():
        return None
    try:
        lines = (work_dir / LOG_NAME).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    detail = " ".join(line.strip() for line in lines[-3:] if line.strip())
    reason = f": {detail}" if detail else ""
    return f"Cloud Storage could not be mounted at /gcs/ for replica {work_dir.name}{reason}"


def with_gcs_mount(
    argv: Sequence[str], storage_url: str | None, log_file: Path, *, at: Path | None = None
) -> list[str]:
    """``argv`` run with ``/gcs/`` mounted (or ``argv`` itself, when it cannot be).

    ``log_file`` is rclone's log, in the replica's working directory (:data:`LOG_NAME`): the
    failure marker is written beside it. ``at``: mount there instead, in this machine's own mount
    namespace, for an engine's container that binds it at its ``/gcs`` and runs on a network of its
    own (:mod:`.replica_network`): the engine mounts that network's namespace under ``/run/netns``,
    which its other commands (``ps``, ``stop``, ``rm``) must see, so the engine cannot run in a
    mount namespace of the replica's. The mount ends with the replica, as rclone does on SIGTERM.
    """
    if not storage_url or mount_unavailable() is not None:
        return list(argv)
    # rclone as the service finds it: a replica's PATH is its image's (.host_env), not the service's.
    rclone = shutil.which("rclone") or "rclone"
    script = ["sh", "-c", _SCRIPT, "aip-gcs-mount", str(log_file), storage_url.rstrip("/"), rclone]
    if at is not None:
        at.mkdir(parents=True, exist_ok=True)
        return [*script, str(at), *argv]
    unshare = ["unshare", "--mount", "--propagation", "private"]
    return [*unshare, *script, str(MOUNT_POINT), *argv]


def fuse_mounts() -> list[Path]:
    """This mount namespace's FUSE mount points (``/proc/self/mounts``, its ``\\040`` escapes decoded)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 2 and fields[2].startswith("fuse"):
            points.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])))
    return points


def unmount_left_over(root: Path) -> list[Path]:
    """Unmount every FUSE mount under ``root`` that a replica left behind; the ones it unmounted.

    A container replica's ``/gcs/`` is mounted in this machine's namespace (``at``, above), so a
    SIGKILL of the replica's process group, or of the service, leaves the mount with its rclone
    dead ("Transport endpoint is not connected") until someone unmounts it: the replica's own
    stop, or the next service on its data dir. Lazily (``-z``), as the directory may still be open.
    """
    gone, root = [], root.resolve()
    for point in fuse_mounts():
        if point != root and root not in point.parents:
            continue
        for tool in ("fusermount3", "fusermount"):
            argv = [tool, "-u", "-z", str(point)]
            if shutil.which(tool) and subprocess.run(argv, capture_output=True, check=False).returncode == 0:
                gone.append(point)
                break
    return gone
