#!/usr/bin/env bash
# Builds metrics-server (sigs.k8s.io/metrics-server, the version pinned in
# hack/metrics-server/go.mod, from the Go module proxy) into
# _output/bin/metrics-server, for the kubectl top e2e test
# (e2e/metricsserver_test.go runs it as a Deployment). Cached like the
# sample device plugin: /var/cache/nodeagent-dev/metrics-server/<key>, the key
# being hack/metrics-server/go.mod, go.sum and the Go version. Idempotent: a
# warm cache only copies. Two callers at once (make test's phases) build it
# once: the build holds a lock on the cache directory. Static
# (CGO_ENABLED=0): the test's image holds nothing else. The version it
# reports is the pin, as a release build's.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh

key=$( (cat hack/metrics-server/go.mod hack/metrics-server/go.sum; go version; echo "$UPSTREAM_GO_FLAGSET") | sha256sum | cut -c1-16)
cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/metrics-server/$key
name=metrics-server
mkdir -p "$cache"

if [ ! -x "$cache/$name" ]; then
  exec 9>"$cache/.lock"
  flock 9
  if [ ! -x "$cache/$name" ]; then
    pin=$(cd hack/metrics-server && go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)
    echo "build-metrics-server: building metrics-server $pin (cold: a few minutes on 2 cores; cached afterwards in $cache)" >&2
    s=$(date +%s)
    ldflags="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$pin"
    (cd hack/metrics-server && nice -n 10 go build -ldflags="$ldflags" -o "$cache/$name.tmp" \
      sigs.k8s.io/metrics-server/cmd/metrics-server)
    mv "$cache/$name.tmp" "$cache/$name"
    echo "build-metrics-server: built in $(( $(date +%s) - s ))s" >&2
  fi
  exec 9>&-
fi
if ! cmp -s "$cache/$name" "$out/$name"; then
  cp -f "$cache/$name" "$out/$name.tmp.$$" && mv -f "$out/$name.tmp.$$" "$out/$name"
fi
