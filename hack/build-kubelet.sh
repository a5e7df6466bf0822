#!/usr/bin/env bash
# Builds kubelet from the k8s.io/kubernetes version pinned in
# hack/controlplane/go.mod into _output/bin/kubelet: the baseline of the
# vs-kubelet benchmark (hack/bench/vs-kubelet). It never enters the product's
# module. Cached like the control plane: /var/cache/nodeagent-dev/kubelet/<key>,
# the key being hack/controlplane/go.mod, go.sum, the Go version and the build
# flags (those of every upstream build of the project). Idempotent: a warm
# cache only copies. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

flags=("-ldflags=$(upstream_ldflags)") # kubeletVersion: the pinned release
key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET" "${flags[@]}") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/kubelet/$key
pin=$(cd hack/controlplane && go list -m -f '{{.Version}}' k8s.io/kubernetes)

if [ ! -x "$cache/kubelet" ]; then
  echo "build-kubelet: building kubelet $pin (cold: several minutes on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  (cd hack/controlplane && nice -n 10 go build "${flags[@]}" -o "$cache/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet)
  mv "$cache/kubelet.tmp" "$cache/kubelet"
  echo "build-kubelet: built kubelet in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/kubelet" "$out/kubelet"; then
  cp -f "$cache/kubelet" "$out/kubelet.tmp" && mv -f "$out/kubelet.tmp" "$out/kubelet"
fi
