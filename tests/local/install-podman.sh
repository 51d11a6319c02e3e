#!/usr/bin/env bash
# Installs what tests/local needs to run real containers on a CI machine without a Docker engine:
# Debian's podman and runc, and a containers.conf that makes them work as root on hosts where crun
# refuses the hybrid cgroup layout and raising RLIMIT_NOFILE is not permitted. Idempotent: a host
# that already has podman is left as it is; without root or apt-get it says so and the tests skip.
set -euo pipefail

CONF=/etc/containers/containers.conf
if ! command -v podman >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: podman is not installed and this script needs root and apt-get; tests/local will skip" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -q && apt-get install -y -q --no-install-recommends podman runc; } >/dev/null \
    || { echo "warning: could not install podman/runc; tests/local will skip" >&2; exit 0; }
fi
# only write the configuration this script owns: a host's own containers.conf is never replaced
if [ "$(id -u)" = 0 ] && { [ ! -e "$CONF" ] || grep -q '^# acagpu tests/local' "$CONF"; }; then
  mkdir -p /etc/containers
  cat >"$CONF" <<'CONF'
# acagpu tests/local: runc and cgroupfs because crun refuses hybrid cgroup hosts; no default
# ulimits because setting RLIMIT_NOFILE is not permitted in unprivileged CI sandboxes.
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi
podman --version
