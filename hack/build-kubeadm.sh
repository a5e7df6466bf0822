#!/usr/bin/env bash
# Builds kubeadm from the k8s.io/kubernetes version pinned in
# hack/controlplane/go.mod, with the control plane's flags
# (hack/upstream-go.sh: the packages they share compile once), into
# _output/bin, for the kubeadm join test (hack/test-join.sh). Cached like the
# control plane (hack/build-controlplane.sh) but in a directory of its own:
# /var/cache/nodeagent-dev/kubeadm/<key>, the key being hack/controlplane's
# go.mod and go.sum, the Go version and the flags. Idempotent: a warm cache
# only copies.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/kubeadm/$key
pin=$(cd hack/controlplane && go list -m -f '{{.Version}}' k8s.io/kubernetes)

if [ ! -x "$cache/kubeadm" ]; then
  echo "build-kubeadm: building kubeadm $pin (cold: a few minutes on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  # The version kubeadm reports (and compares with the control plane's and
  # the kubelet's in its preflight) is the pin, as in a release build.
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$pin -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$pin" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  (cd hack/controlplane && nice -n 10 go build -ldflags="$ldflags" -o "$cache/kubeadm.tmp" k8s.io/kubernetes/cmd/kubeadm)
  mv "$cache/kubeadm.tmp" "$cache/kubeadm"
  echo "build-kubeadm: built kubeadm in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/kubeadm" "$out/kubeadm"; then
  cp -f "$cache/kubeadm" "$out/kubeadm.tmp" && mv -f "$out/kubeadm.tmp" "$out/kubeadm"
fi
