# Sourced by every script that builds a program from hack/controlplane (the
# module that pins k8s.io/kubernetes): the control plane, kubeadm, the
# conformance suite and its images, the sample device plugin, kubelet (the
# benchmark's baseline), and the modules beside it: metrics-server, etcd.
# One flag set for all of them, so that a package they share (k8s.io/api,
# client-go, apimachinery, apiserver, gRPC...) is compiled once per cold
# build, not once per flag set (issue 33, docs/testing.md "Cold runs"):
# static (no cgo) as Kubernetes' release builds are, and -trimpath. The
# agent's own module has its flag set in hack/build.sh (the Makefile exports
# it to every go command of a make run).
export CGO_ENABLED=0
export GOFLAGS=-trimpath
# Part of every cache key of those programs: a cache built with other flags
# is not this one.
UPSTREAM_GO_FLAGSET="CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS"

# upstream_ldflags: -s -w and the version a release build stamps (upstream's
# hack/lib/version.sh: k8s.io/component-base/version and
# k8s.io/client-go/pkg/version), so that the API server's /version,
# `kubectl version` and a kubelet's kubeletVersion say the pinned release,
# not "v0.0.0-master+$Format:%H$", which the e2e framework and kubectl
# itself refuse to parse ("could not parse pre-release/metadata").
upstream_ldflags() {
  local pin minor f=(-s -w) pkg
  pin=$(cd "$(dirname "${BASH_SOURCE[0]}")/controlplane" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=$(echo "$pin" | cut -d. -f2)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=(-X "$pkg.gitVersion=$pin" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$minor" -X "$pkg.gitTreeState=clean")
  done
  echo "${f[*]}"
}
