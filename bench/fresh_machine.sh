#!/usr/bin/env bash
# `make test` on a new machine: a fresh clone, in a container made from a bare Debian bookworm root
# filesystem that has only what the README promises (Python 3.11 with venv and pip, make) plus git,
# ca-certificates and what a shell needs. Nothing else: no Debian package of the project's, empty apt
# lists, no uv or pip cache, no container image. It times the whole `CI=true make test`, which
# installs everything itself (the virtualenv, then the Debian packages, then the base image beside
# the tests), and prints pytest's own time and counts from its log.
#
#   bench/fresh_machine.sh [COMMIT]                  time `CI=true make test` at COMMIT (default HEAD)
#   bench/fresh_machine.sh --command 'CMD' [COMMIT]  run CMD in the fresh clone instead (a check)
#   AIP_FRESH_RUN_ARGS='--cpu-shares 128' ...        more `podman run` options (here: yield the CPU)
#
# As root on a host with podman and mmdebstrap. The root filesystem is built once and kept in
# $AIP_FRESH_CACHE (default /var/tmp/aip-fresh, outside the repository); each run starts a new
# container from it, with a new empty store for the podman inside, and removes both afterwards.
# The log of each run stays in $AIP_FRESH_CACHE/logs/. What the container lifts that a real new
# machine would not need lifting: docs/development.md, "make test on a new machine".
set -euo pipefail
command_inside=""
if [ "${1:-}" = "--command" ]; then command_inside=$2; shift 2; fi
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --verify "${1:-HEAD}^{commit}")
git_dir=$(cd "$repo" && cd "$(git rev-parse --git-common-dir)" && pwd)
cache=${AIP_FRESH_CACHE:-/var/tmp/aip-fresh}
mkdir -p "$cache/logs"

# 1. The bare root filesystem, once per package list: Debian's minbase (essential + apt) and these.
packages=(python3 python3-venv python3-pip make git ca-certificates procps iproute2)
mirror=${AIP_FRESH_MIRROR:-http://deb.debian.org/debian}
security=${AIP_FRESH_SECURITY:-http://deb.debian.org/debian-security}
key=$(printf '%s\n' bookworm "$mirror" "$security" "${packages[@]}" | sha256sum | cut -c1-12)
rootfs=$cache/rootfs-bookworm-$key.tar
if [ ! -f "$rootfs" ]; then
  echo "building the bare root filesystem $rootfs (once)"
  started=$SECONDS
  rm -rf "$rootfs.part"
  (IFS=,; mmdebstrap --quiet --format=tar --variant=minbase --include="${packages[*]}" bookworm "$rootfs.part" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main")
  mv "$rootfs.part" "$rootfs"
  echo "root filesystem built in $((SECONDS - started)) s"
fi

# 2. A container from it (limits: podman's defaults for root exceed what this workplace allows and
# fail "error setting rlimit"; open files as the host's own, processes 32768, the most allowed here), privileged (podman, FUSE, mount namespaces and cgroups inside), on a network
# of its own: the podman inside makes bridges and firewall rules, and the tests listen on
# 127.0.0.1, so none of it may land in this host's namespace beside other runs. A cgroup namespace
# of its own, as a machine has: on this host's cgroup v1, the container's cgroup mounts start at its
# own group, which /proc/self/cgroup names from the host's root (the local service's machine limits
# then find no cgroup to make, and fall back to the watchdog).
work=$(mktemp -d "$cache/run.XXXXXX")
name=aip-fresh-${work##*.}
image=localhost/aip-fresh:${work##*.}
network=$name
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log=$cache/logs/$stamp-${commit:0:12}.log
cleanup() {
  podman rm --force --time 10 "$name" >/dev/null 2>&1 || true
  podman rmi --force "$image" >/dev/null 2>&1 || true
  podman network rm --force "$network" >/dev/null 2>&1 || true
  # the inner store's overlay mounts end with the container; a leftover one would hold the dir
  grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/containers" "$work/io/ca"
podman import --quiet "$rootfs" "$image" >/dev/null
# A subnet the host's own networks do not use (the inner podman's default is 10.88.0.0/16).
podman network create --subnet 10.231.0.0/24 "$network" >/dev/null
# This workplace reaches the internet through a TLS proxy with a CA of its own: the container trusts
# what the host trusts, and gets the host's CA variables (a real new machine needs neither).
cp /usr/local/share/ca-certificates/*.crt "$work/io/ca/" 2>/dev/null || true
ca_env=()
for var in SSL_CERT_FILE REQUESTS_CA_BUNDLE PIP_CERT CURL_CA_BUNDLE GIT_SSL_CAINFO; do
  [ -z "${!var:-}" ] || ca_env+=(--env "$var=${!var}")
done
if [ -n "$command_inside" ]; then
  measured=$command_inside
else
  measured='CI=true make test </dev/null'
fi
cat >"$work/io/inside.sh" <<INSIDE
set -uo pipefail
if compgen -G '/fresh/ca/*.crt' >/dev/null; then
  cp /fresh/ca/*.crt /usr/local/share/ca-certificates/ && update-ca-certificates >/dev/null 2>&1
fi
git clone --quiet --no-local /src.git /root/airflow-aip && cd /root/airflow-aip \
  && git -c advice.detachedHead=false checkout --quiet $commit || exit 99
started=\$(date +%s%N)
( $measured ) >/fresh/run.log 2>&1
status=\$?
echo "\$status \$(( (\$(date +%s%N) - started) / 1000000 ))" >/fresh/result
INSIDE
echo "running '$measured' at $commit in a fresh container ($name); log: $log"
# An init as PID 1 that reaps orphans, as a machine's init does (a zombie answers kill -0, so a test
# that waits for a process to end would wait on): the host's catatonit or tini, where there is one.
init=()
for candidate in /usr/libexec/podman/catatonit /usr/bin/catatonit /usr/bin/tini; do
  if [ -x "$candidate" ]; then init=(--init --init-path "$candidate"); break; fi
done
# /dev/shm as big as the host's (podman's default, 64 MB, is a container's; Chromium and
# PostgreSQL use it).
shm=$(df --output=size -B1 /dev/shm | tail -n 1)
# This workplace's machines come with pyenv's Pythons (3.10 among them: the jobs of most of Vertex
# AI's images run on it), which Debian's packages do not have: lent read-only, as a new machine here
# has them. Elsewhere `make job-pythons` has uv install a 3.10 (a download this host cannot make).
pythons=()
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ ! -d "$pyenv_root/versions" ] || pythons=(--volume "$pyenv_root/versions:/root/.pyenv/versions:ro")
set +e
podman run --rm --name "$name" --privileged --cgroupns=private --network "$network" --device /dev/fuse \
  --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=32768:32768 \
  --hostname fresh-machine "${init[@]}" --shm-size "$shm" \
  --volume "$git_dir:/src.git:ro" --volume "$work/containers:/var/lib/containers" \
  --volume "$work/io:/fresh" "${ca_env[@]}" "${pythons[@]}" ${AIP_FRESH_RUN_ARGS:-} \
  "$image" bash /fresh/inside.sh
podman_status=$?
set -e
cp "$work/io/run.log" "$log" 2>/dev/null || true
if [ ! -s "$work/io/result" ]; then
  echo "the container ended ($podman_status) before the measured command did; log: $log" >&2
  exit 1
fi
read -r status millis <"$work/io/result"
seconds=$((millis / 1000))
printf 'wall time of %s: %d.%01d s (%d min %02d s), exit %s\n' "$measured" "$seconds" \
  "$((millis % 1000 / 100))" "$((seconds / 60))" "$((seconds % 60))" "$status"
# pytest's summary line, e.g. "==== 1234 passed, 3 skipped in 497.12s (0:08:17) ===="
summary=$(grep -E '^=+ .*[0-9]+ (passed|failed|error).* in [0-9.]+s' "$log" | tail -n 1 || true)
if [ -n "$summary" ]; then
  echo "pytest: $(printf '%s' "$summary" | sed -E 's/^=+ //; s/ =+$//')"
fi
base=$(grep -E '^base images ready' "$log" | tail -n 1 || true)
[ -z "$base" ] || echo "$base"
exit "$status"
