#!/usr/bin/env bash
# Packs this machine's Debian podman, runc and conmon with the shared libraries they load (not
# glibc: the GPU host's own, newer one serves) into build/podman-bundle.tar.gz, plus click for
# running acagpu there. The GPU host has no container runtime and no network; run-on-gpu-host.sh
# unpacks this there. Needs tests/local/install-podman.sh first.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/podman-bundle
rm -rf "$out" && mkdir -p "$out/real" "$out/lib" "$out/bin" "$out/pydeps"
for exe in "$(command -v podman)" "$(command -v runc)" /usr/bin/conmon; do
  cp "$exe" "$out/real/"
  ldd "$exe" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;; *) cp -n "$lib" "$out/lib/" ;; esac
  done
done
for exe in podman runc conmon; do
  printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="$here/lib" exec "$here/real/%s" "$@"\n' "$exe" >"$out/bin/$exe"
  chmod +x "$out/bin/$exe"
done
cp /usr/share/containers/seccomp.json "$out/" 2>/dev/null || true
.venv/bin/pip download -q --no-deps -d "$out/wheels" click
for w in "$out"/wheels/*.whl; do python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$out/pydeps"; done
rm -rf "$out/wheels"
tar -C build -czf build/podman-bundle.tar.gz podman-bundle
ls -la build/podman-bundle.tar.gz
