#!/usr/bin/env bash
# Builds kubernetes-csi's external-provisioner and external-resizer (the
# versions pinned in hack/csi-sidecars/go.mod, from the Go module proxy)
# into _output/bin/csi-provisioner and _output/bin/csi-resizer, for the
# storage tests: e2e TestCSIStatefulSet and hack/conformance.sh's storage
# specs run them as a controller Deployment beside the test CSI driver
# (internal/testing/csihostpath), the way the host-path driver's deploy
# manifests do. Cached like metrics-server: /var/cache/nodeagent-dev/
# csi-sidecars/<key>, the key being hack/csi-sidecars/go.mod, go.sum, the Go
# version and the upstream flag set. Idempotent: a warm cache only copies.
# Two callers at once (make test's phases, the e2e test) build them once:
# the build holds a lock on the cache directory. Static (CGO_ENABLED=0):
# their image holds nothing else. The version each reports is its pin, as
# the release images' (release-tools: -X main.version).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh
export GOWORK=off

key=$( (cat hack/csi-sidecars/go.mod hack/csi-sidecars/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/csi-sidecars/$key
names=(csi-provisioner csi-resizer)
mkdir -p "$cache"

built() { local n; for n in "${names[@]}"; do [ -x "$cache/$n" ] || return 1; done; }
if ! built; then
  exec 9>"$cache/.lock"
  flock 9
  if ! built; then
    echo "build-csi-sidecars: building external-provisioner and external-resizer (cold: a few minutes on 2 cores; cached afterwards in $cache)" >&2
    s=$(date +%s)
    cd hack/csi-sidecars
    for n in "${names[@]}"; do
      case $n in
        csi-provisioner) mod=github.com/kubernetes-csi/external-provisioner/v5 ;;
        csi-resizer) mod=github.com/kubernetes-csi/external-resizer ;;
      esac
      pin=$(go list -m -f '{{.Version}}' "$mod")
      nice -n 10 go build -ldflags="-s -w -X main.version=$pin" -o "$cache/$n.tmp" "$mod/cmd/$n"
    done
    for n in "${names[@]}"; do mv "$cache/$n.tmp" "$cache/$n"; done
    cd - >/dev/null
    echo "build-csi-sidecars: built in $(( $(date +%s) - s ))s" >&2
  fi
  exec 9>&-
fi
for n in "${names[@]}"; do
  if ! cmp -s "$cache/$n" "$out/$n"; then
    cp -f "$cache/$n" "$out/$n.tmp.$$" && mv -f "$out/$n.tmp.$$" "$out/$n"
  fi
done
