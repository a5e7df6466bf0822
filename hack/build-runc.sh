#!/usr/bin/env bash
# Builds runc (a release with idmapped mounts, which user namespaces need:
# runc 1.2 or later; Debian's is 1.1) from the Go module proxy, for the
# runtime tests of user namespaces against the current containerd
# (make test's containerd 2.x phase; NODEAGENT_RUNC_BIN, see
# internal/testing/testimage). Built without the seccomp tag (no
# libseccomp-dev needed): only the user-namespace test runs on it. Cached
# outside the tree under
#   ${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/runc/<version>-<go version>/runc
# and linked as _output/bin/runc-current/runc. A warm run only links.
#
# Usage: hack/build-runc.sh   (prints the runc path on the last line)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=v1.5.3
gover=$(go env GOVERSION)
cache="${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/runc/${version}-${gover}"
out=$root/_output/bin/runc-current

mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
if [ -x "$cache/runc" ]; then
  echo "runc $version (built with $gover): cached in $cache" >&2
else
  echo "building runc $version with $gover into $cache" >&2
  t0=$(date +%s)
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  # runc's nsenter is C: cgo is required.
  CGO_ENABLED=1 GOFLAGS=-mod=mod GOBIN="$cache.tmp" \
    go install -trimpath -ldflags "-X main.version=${version#v}" "github.com/opencontainers/runc@$version"
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  echo "built runc $version in $(( $(date +%s) - t0 ))s" >&2
fi
mkdir -p "$out"
ln -sfn "$cache/runc" "$out/runc"
"$out/runc" --version >&2
echo "$out/runc"
