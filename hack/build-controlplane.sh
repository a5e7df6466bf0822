#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
# from the k8s.io/kubernetes version pinned in hack/controlplane/go.mod into
# _output/bin, and etcd (hack/build-etcd.sh: etcd 3.6 from its own module, not
# the host's). Binaries are cached outside the work tree, keyed by the pin and
# the Go version, so a fresh clone (CI) only copies them; a new pin rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

ldflags=$(upstream_ldflags) # the release's version stamped in, as kubeadm's
key=$( (cat hack/controlplane/go.mod hack/controlplane/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET" "$ldflags") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/controlplane/$key
pin=$(cd hack/controlplane && go list -m -f '{{.Version}}' k8s.io/kubernetes)
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

have_all() { for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done; }

if ! have_all "$cache"; then
  echo "build-controlplane: building Kubernetes $pin control plane (cold: about 10 minutes on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  total=$(date +%s)
  # One go build for all of them: the packages they share are compiled once
  # and the compiler keeps both cores busy across binaries.
  todo=()
  for b in "${bins[@]}"; do [ -x "$cache/$b" ] || todo+=("k8s.io/kubernetes/cmd/$b"); done
  tmp=$(mktemp -d "$cache/tmp.XXXXXX")
  (cd hack/controlplane && go build -ldflags="$ldflags" -o "$tmp/" "${todo[@]}")
  for b in "${bins[@]}"; do [ -x "$tmp/$b" ] && mv -f "$tmp/$b" "$cache/$b"; done
  rm -rf "$tmp"
  echo "build-controlplane: done in $(( $(date +%s) - total ))s" >&2
fi
for b in "${bins[@]}"; do
  if ! cmp -s "$cache/$b" "$out/$b"; then
    cp -f "$cache/$b" "$out/$b.tmp" && mv -f "$out/$b.tmp" "$out/$b"
  fi
done
# The store they run on: etcd 3.6 from its Go module (cached the same way).
hack/build-etcd.sh
