#!/usr/bin/env bash
# Builds kubernetes-csi's external-provisioner, external-resizer and
# external-attacher (the versions pinned in hack/csi-sidecars/go.mod and
# hack/csi-sidecars/attacher/go.mod, from the Go module proxy) into
# _output/bin/csi-provisioner, _output/bin/csi-resizer and
# _output/bin/csi-attacher, for the storage tests: e2e TestCSIStatefulSet,
# TestCSIAttachRequired and hack/conformance.sh's storage specs run them as
# a controller Deployment beside the test CSI driver
# (internal/testing/csihostpath), the way the host-path driver's deploy
# manifests do. external-attacher is a module of its own: v4.13.0 needs
# k8s.io/* v0.37, which external-provisioner's replace lines (v0.33) rule
# out in one build list. Cached like metrics-server: /var/cache/nodeagent-dev/
# csi-sidecars/<key>, one key per module, the key being its go.mod, go.sum,
# the Go version and the upstream flag set. Idempotent: a warm cache only
# copies. Two callers at once (make test's phases, the e2e test) build them
# once: each module's build holds a lock on its cache directory. Static
# (CGO_ENABLED=0): their image holds nothing else. The version each reports
# is its pin, as the release images' (release-tools: -X main.version).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/_output/bin
mkdir -p "$out"
source hack/upstream-go.sh
export GOWORK=off

# build_module DIR NAME=MODULE...: the programs NAME (MODULE/cmd/NAME) of
# the module in DIR, cached under that module's key, copied to $out.
build_module() {
  local dir=$1 key cache n mod pin s
  shift
  local -a names=() mods=()
  for n in "$@"; do names+=("${n%%=*}"); mods+=("${n#*=}"); done
  key=$( (cat "$dir/go.mod" "$dir/go.sum"; go version; echo "$UPSTREAM_GO_FLAGSET") | sha256sum | cut -c1-16)
  cache=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/csi-sidecars/$key
  mkdir -p "$cache"
  built() { local n; for n in "${names[@]}"; do [ -x "$cache/$n" ] || return 1; done; }
  if ! built; then
    exec 9>"$cache/.lock"
    flock 9
    if ! built; then
      echo "build-csi-sidecars: building ${names[*]} (cold: minutes on 2 cores; cached afterwards in $cache)" >&2
      s=$(date +%s)
      for i in "${!names[@]}"; do
        n=${names[$i]} mod=${mods[$i]}
        pin=$(cd "$dir" && go list -m -f '{{.Version}}' "$mod")
        (cd "$dir" && nice -n 10 go build -ldflags="-s -w -X main.version=$pin" -o "$cache/$n.tmp" "$mod/cmd/$n")
      done
      for n in "${names[@]}"; do mv "$cache/$n.tmp" "$cache/$n"; done
      echo "build-csi-sidecars: built ${names[*]} in $(( $(date +%s) - s ))s" >&2
    fi
    exec 9>&-
  fi
  for n in "${names[@]}"; do
    if ! cmp -s "$cache/$n" "$out/$n"; then
      cp -f "$cache/$n" "$out/$n.tmp.$$" && mv -f "$out/$n.tmp.$$" "$out/$n"
    fi
  done
}

build_module hack/csi-sidecars \
  csi-provisioner=github.com/kubernetes-csi/external-provisioner/v5 \
  csi-resizer=github.com/kubernetes-csi/external-resizer
build_module hack/csi-sidecars/attacher \
  csi-attacher=github.com/kubernetes-csi/external-attacher/v4
