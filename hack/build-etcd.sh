#!/usr/bin/env bash
# Builds the etcd server the local control plane runs (etcd v3.6.4, pinned in
# hack/etcd/go.mod: the version Kubernetes v1.34.4 supports and kubeadm
# deploys) into _output/bin/etcd. Debian's etcd-server (3.4) is not used:
# Kubernetes 1.34 does not support it (no watch progress notifications, so a
# watch without a resource version fails with "Too large resource version").
#
# Cached like the control plane, in a directory of its own (hack/etcd is a
# module of its own, with etcd's own dependency versions as its release
# builds have them, so that pinning etcd never changes the control plane's
# module graph or cache key): /var/cache/nodeagent-dev/etcd/<key>, the
# key being hack/etcd/go.mod, go.sum, the Go version and the build flags.
# Idempotent: a warm cache only copies. Static (CGO_ENABLED=0), with the
# flags every upstream build of the project uses.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

flags=("-ldflags=-s -w")
key=$( (cat hack/etcd/go.mod hack/etcd/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET" "${flags[@]}") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/etcd/$key
pin=$(cd hack/etcd && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

if [ ! -x "$cache/etcd" ]; then
  echo "build-etcd: building etcd $pin (cold: a minute or two on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  (cd hack/etcd && nice -n 10 go build "${flags[@]}" -o "$cache/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$cache/etcd.tmp" "$cache/etcd"
  echo "build-etcd: built etcd in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/etcd" "$out/etcd"; then
  cp -f "$cache/etcd" "$out/etcd.tmp" && mv -f "$out/etcd.tmp" "$out/etcd"
fi
