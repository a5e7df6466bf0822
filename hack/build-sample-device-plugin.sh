#!/usr/bin/env bash
# Builds the sample device plugin (test/images/sample-device-plugin of the
# k8s.io/kubernetes version pinned in hack/controlplane/go.mod) into
# _output/bin/sample-device-plugin, for the device plugin e2e test
# (e2e/devices_test.go runs it as a pod). Cached like the control plane:
# /var/cache/nodeagent-dev/sample-device-plugin/<key>, the key being
# hack/controlplane/go.sum and the Go version. Idempotent: a warm cache
# only copies. Static (CGO_ENABLED=0): the test's image has nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

key=$( (cat hack/controlplane/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/sample-device-plugin/$key
name=sample-device-plugin

if [ ! -x "$cache/$name" ]; then
  echo "build-sample-device-plugin: building (cold: a minute or two on 2 cores; cached afterwards in $cache)" >&2
  mkdir -p "$cache"
  s=$(date +%s)
  (cd hack/controlplane && nice -n 10 go build -ldflags="-s -w" -o "$cache/$name.tmp" \
    k8s.io/kubernetes/test/images/sample-device-plugin)
  mv "$cache/$name.tmp" "$cache/$name"
  echo "build-sample-device-plugin: built in $(( $(date +%s) - s ))s" >&2
fi
if ! cmp -s "$cache/$name" "$out/$name"; then
  cp -f "$cache/$name" "$out/$name.tmp" && mv -f "$out/$name.tmp" "$out/$name"
fi
