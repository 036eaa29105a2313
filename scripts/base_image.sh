#!/usr/bin/env bash
# The trainer base image, built once per machine from Debian's packages (no image registry on the
# internet is needed) and cached in the engine's store: `localhost/aip-base:bookworm-py3` (Debian
# bookworm, python3, pip) and on top `localhost/aip-base:bookworm-py3-hypertune` (cloudml-hypertune,
# which a tuned trainer imports). A tag already present is kept. As root with podman or docker and
# mmdebstrap; elsewhere it says why not, and the container tests skip (under CI: it fails, naming
# what is missing, as the tests would).
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
# Without what the image needs: a note on a developer's machine, a failure under CI.
without() {
  case "${CI:-}" in
    ""|0|false|no|off) echo "note: $1; the container tests skip"; exit 0 ;;
    *) echo "base_image.sh: $1, and under CI a missing tool fails (make prepare, as root, installs it)" >&2; exit 1 ;;
  esac
}
BASE=localhost/aip-base:bookworm-py3
HYPERTUNE=localhost/aip-base:bookworm-py3-hypertune
engine="${AIP_CONTAINER_ENGINE:-}"
if [ -z "$engine" ]; then
  for candidate in podman docker; do
    if have "$candidate" && "$candidate" info >/dev/null 2>&1; then engine=$candidate; break; fi
  done
fi
[ -n "$engine" ] || without "no container engine (podman, or a docker that runs) works here"
exists() { "$engine" image inspect "$1" >/dev/null 2>&1; }
started=$SECONDS
# One build at a time on this machine: `make test` starts a build in the background, and a container
# test that needs the image runs this script too, which then waits here for that build to end.
exec 9>"${TMPDIR:-/tmp}/aip-base-image.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! exists "$BASE"; then
  have mmdebstrap || without "mmdebstrap is missing (make deps)"
  echo "building $BASE with mmdebstrap (minutes, once per machine)"
  mmdebstrap --quiet --variant=essential --include=python3,python3-pip,ca-certificates \
    bookworm "$work/base.tar"
  "$engine" import --quiet --change 'CMD ["python3"]' "$work/base.tar" "$BASE" >/dev/null
fi
# The layer trainers build on. Debian marks its Python externally managed (PEP 668): the marker
# goes, so `pip install` works as in the python:3 images Google's guides start FROM (and as the
# SDK's from_local_script runs it). Its label is a hash of this text: a changed layer is rebuilt.
layer=$(cat <<DOCKERFILE
FROM $BASE
COPY ca.crt /tmp/ca.crt
RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED && PIP_CERT=/tmp/ca.crt pip install --quiet --root-user-action=ignore \
    --no-cache-dir cloudml-hypertune && rm /tmp/ca.crt
DOCKERFILE
)
key=$(printf '%s' "$layer" | sha256sum | cut -c1-12)
built=$("$engine" image inspect --format '{{ index .Config.Labels "aip-base.layer" }}' "$HYPERTUNE" 2>/dev/null || true)
if [ "$built" != "$key" ]; then
  stale=$("$engine" image inspect --format '{{.Id}}' "$HYPERTUNE" 2>/dev/null || true)
  # The host's CA bundle, so pip reaches the index this machine reaches.
  cp /etc/ssl/certs/ca-certificates.crt "$work/ca.crt"
  printf '%s\nLABEL aip-base.layer=%s\n' "$layer" "$key" > "$work/Containerfile"
  "$engine" build --quiet --network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    -t "$HYPERTUNE" -f "$work/Containerfile" "$work" >/dev/null
  [ -z "$stale" ] || "$engine" rmi "$stale" >/dev/null 2>&1 || true  # the layer it replaces, if unused
fi
echo "base images ready ($engine, $((SECONDS - started)) s): $BASE, $HYPERTUNE"
