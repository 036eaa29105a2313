"""``/gcs/BUCKET/...`` for a trainer, as Vertex AI mounts Cloud Storage with Cloud Storage FUSE.

Vertex AI mounts every bucket the job may read at ``/gcs/`` and recommends it to trainers
(seed 004: "Vertex AI mounts Cloud Storage buckets ... at /gcs/"). Here each replica runs in a
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
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

MOUNT_POINT = Path("/gcs")
# Start rclone, wait for the mount, run the trainer, unmount; exit as the trainer did (a signal
# death is passed on as the same signal, so the replica's status reads as on Vertex).
_SCRIPT = r"""
log=$1; url=$2; shift 2
rclone mount :gcs: /gcs --gcs-endpoint "$url/storage/v1/" --gcs-anonymous --gcs-project-number 0 \
  --gcs-bucket-policy-only --vfs-cache-mode off --dir-cache-time 1s --poll-interval 0 \
  --log-file "$log" --log-level NOTICE &
rclone=$!
i=0
until mountpoint -q /gcs; do
  i=$((i + 1))
  if [ "$i" -gt 200 ] || ! kill -0 "$rclone" 2>/dev/null; then
    echo "aip-local: /gcs/ could not be mounted (see $log)" >&2; break
  fi
  sleep 0.05
done
"$@"
rc=$?
fusermount3 -u /gcs 2>/dev/null || fusermount -u /gcs 2>/dev/null
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


def with_gcs_mount(argv: Sequence[str], storage_url: str | None, log_file: Path) -> list[str]:
    """``argv`` run with ``/gcs/`` mounted (or ``argv`` itself, when it cannot be)."""
    if not storage_url or mount_unavailable() is not None:
        return list(argv)
    unshare = ["unshare", "--mount", "--propagation", "private"]
    return [*unshare, "sh", "-c", _SCRIPT, "aip-gcs-mount", str(log_file), storage_url.rstrip("/"), *argv]
