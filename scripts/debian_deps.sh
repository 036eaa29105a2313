#!/usr/bin/env bash
# The Debian packages behind the needs named (browser, servers, fuse, tools, compose, containers) that this machine
# does not meet yet, installed with ONE `apt-get update` and one `apt-get install`. As root with
# apt-get only; elsewhere it says what is missing, and the tests that need it skip (under CI, where
# they would fail instead, it fails itself: CI set to anything but empty, 0, false, no or off).
#   browser  Debian's chromium, which the UI tests drive through playwright (never `playwright install`)
#   servers  PostgreSQL (the e2e and Celery tiers' metadata) and Redis (the Celery broker)
#   fuse     rclone and fuse3: the local service mounts Cloud Storage at /gcs/ in each replica
#   tools    what Google's training images have and trainers call, which a bare machine lacks (curl)
#   compose  docker-compose's CLI, to validate docker-compose.yaml offline (no engine here)
#   containers  an OCI engine for custom-container jobs (podman, unless a working docker is here),
#            mmdebstrap (builds the trainer base image from Debian's packages: scripts/base_image.sh)
#            and docker-registry (a local OCI registry, the stand-in for Artifact Registry)
# Without Debian's Recommends (about 180 packages and 120 MB fewer on a bare machine: docker.io
# beside podman, printing and desktop services beside chromium...). What of them podman needs for
# the replicas' own networks, named here: netavark, aardvark-dns (their hostnames) and iptables.
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
missing=()
for need in "$@"; do
  case "$need" in
    browser) have chromium || missing+=(chromium fonts-dejavu-core) ;;
    servers) { compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null && have redis-server; } \
               || missing+=(postgresql redis-server) ;;
    fuse) { have rclone && have fusermount3; } || missing+=(rclone fuse3) ;;
    tools) have curl || missing+=(curl) ;;
    compose) { have docker-compose || docker compose version >/dev/null 2>&1; } || missing+=(docker-compose) ;;
    containers)
      { have podman || { have docker && docker info >/dev/null 2>&1; }; } || missing+=(podman netavark aardvark-dns iptables)
      have mmdebstrap || missing+=(mmdebstrap)
      have docker-registry || missing+=(docker-registry) ;;
    *) echo "debian_deps.sh: unknown need '$need'" >&2; exit 2 ;;
  esac
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && have apt-get; then
  echo "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  case "$(printf %s "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
    ""|0|false|no|off)
      echo "note: not installed (needs root and apt-get): ${missing[*]}; the tests that need them skip" ;;
    *)
      echo "debian_deps.sh: CI=${CI} and not installed (needs root and apt-get): ${missing[*]}" >&2
      exit 1 ;;
  esac
fi
