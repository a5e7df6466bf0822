#!/usr/bin/env bash
# Builds a current containerd release (the daemon and containerd-shim-runc-v2)
# from the Go module proxy, so the runtime adapter can be tested against it as
# well as against Debian's containerd 1.6. The version is pinned in
# hack/containerd-current/go.mod (a build-only module; the root go.mod is not
# touched). Binaries are cached outside the work tree under
#   ${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/containerd/<version>-<go version>/
# and linked into _output/bin/containerd-current/. A warm run only links.
#
# Usage: hack/build-containerd.sh   (prints the bin directory on the last line)
# Select the result for the runtime/pleg tests with
#   NODEAGENT_CONTAINERD_BIN=_output/bin/containerd-current/containerd
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mod=$root/hack/containerd-current

version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
gover=$(go env GOVERSION)
key="${version}-${gover}"
cache="${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/containerd/$key"
out=$root/_output/bin/containerd-current

# One build at a time: make test's containerd 2.x phase and the cgroup v2
# guest's image (hack/vm/image.sh, beside it) may both ask for it cold.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
if [ -x "$cache/containerd" ] && [ -x "$cache/containerd-shim-runc-v2" ]; then
  echo "containerd $version (built with $gover): cached in $cache" >&2
else
  echo "building containerd $version and containerd-shim-runc-v2 with $gover into $cache" >&2
  t0=$(date +%s)
  mkdir -p "$cache.tmp"
  ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$version"
  # no_btrfs: the btrfs snapshotter needs libbtrfs headers and is not used.
  # The shim is built like upstream's: static, without the gRPC server.
  # Its own flags, whatever the caller's environment (make exports the
  # agent's): the daemon with cgo, as upstream's release builds it.
  (cd "$mod" && export GOFLAGS= &&
    CGO_ENABLED=1 go build -trimpath -tags 'no_btrfs urfave_cli_no_docs' -ldflags "$ldflags" \
      -o "$cache.tmp/containerd" github.com/containerd/containerd/v2/cmd/containerd &&
    CGO_ENABLED=0 go build -trimpath -tags 'no_btrfs urfave_cli_no_docs no_grpc' -ldflags "$ldflags" \
      -o "$cache.tmp/containerd-shim-runc-v2" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  echo "built containerd $version in $(( $(date +%s) - t0 ))s" >&2
fi

mkdir -p "$out"
for b in containerd containerd-shim-runc-v2; do
  ln -sfn "$cache/$b" "$out/$b"
done
"$out/containerd" --version >&2
echo "$out"
