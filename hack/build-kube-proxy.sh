#!/usr/bin/env bash
# Builds kube-proxy from the k8s.io/kubernetes version pinned in
# hack/kube-proxy/go.mod (the same pin as hack/controlplane), for the multi-node cluster's add-ons
# (docs/multinode.md: kube-proxy as a DaemonSet, as kubeadm deploys it).
# A module of its own so that its dependencies never change the control
# plane's cache key. With the flag set every upstream build uses (CGO_ENABLED=0 -trimpath
# -ldflags='-s -w'), cached like the control plane in a directory of its own:
# /var/cache/nodeagent-dev/kube-proxy/<key>, the key being
# hack/kube-proxy/go.mod, go.sum, the Go version and the flags.
# Idempotent: a warm cache only copies. Prints the binary's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

flags="$UPSTREAM_GO_FLAGSET -ldflags=-s -w"
key=$( (cat hack/kube-proxy/go.mod hack/kube-proxy/go.sum; go version; echo "$flags") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/kube-proxy/$key
pin=$(cd hack/kube-proxy && go list -m -f '{{.Version}}' k8s.io/kubernetes)

if [ ! -x "$cache/kube-proxy" ]; then
  echo "build-kube-proxy: building kube-proxy $pin (cold: a few minutes on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  (cd hack/kube-proxy && nice -n 10 go build -ldflags='-s -w' -o "$cache/kube-proxy.tmp" k8s.io/kubernetes/cmd/kube-proxy)
  mv "$cache/kube-proxy.tmp" "$cache/kube-proxy"
  echo "build-kube-proxy: built kube-proxy in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/kube-proxy" "$out/kube-proxy"; then
  cp -f "$cache/kube-proxy" "$out/kube-proxy.tmp" && mv -f "$out/kube-proxy.tmp" "$out/kube-proxy"
fi
echo "$out/kube-proxy"
