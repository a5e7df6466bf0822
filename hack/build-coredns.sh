#!/usr/bin/env bash
# Builds CoreDNS (hack/coredns: its main with only the plugins kubeadm's
# Corefile uses, CoreDNS pinned in hack/coredns/go.mod) for the multi-node
# cluster's DNS add-on (docs/multinode.md: a Deployment behind the kube-dns
# Service, as kubeadm deploys it). A module of its own: CoreDNS pins its
# own k8s.io versions (v0.32), not the control plane's. With the flag set every upstream build uses (CGO_ENABLED=0 -trimpath
# -ldflags='-s -w'), cached like the control plane in a directory of its own:
# /var/cache/nodeagent-dev/coredns/<key>, the key being
# hack/coredns/go.mod, go.sum, the Go version and the flags.
# Idempotent: a warm cache only copies. Prints the binary's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

flags="$UPSTREAM_GO_FLAGSET -ldflags=-s -w"
key=$( (cat hack/coredns/go.mod hack/coredns/go.sum; go version; echo "$flags") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/coredns/$key
pin=$(cd hack/coredns && go list -m -f '{{.Version}}' github.com/coredns/coredns)

if [ ! -x "$cache/coredns" ]; then
  echo "build-coredns: building CoreDNS $pin with the plugins kubeadm's Corefile uses (cold: a few minutes on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  (cd hack/coredns && nice -n 10 go build -ldflags='-s -w' -o "$cache/coredns.tmp" .)
  mv "$cache/coredns.tmp" "$cache/coredns"
  echo "build-coredns: built coredns in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/coredns" "$out/coredns"; then
  cp -f "$cache/coredns" "$out/coredns.tmp" && mv -f "$out/coredns.tmp" "$out/coredns"
fi
echo "$out/coredns"
