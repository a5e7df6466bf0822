#!/usr/bin/env python3
"""Counts the package compilations a cold `make test` needs, without
compiling (docs/testing.md, "One flag set per module family").

A package compiles once per distinct (flag set, path@version, the keys of
its imports), as the go command keys its actions; each build of the run is
listed below with the flags its script uses, and `go list -deps` gives its
packages. Run from the repository root: python3 hack/compilecount/count.py
(the race detector's and the fuzzer's instrumented builds are not counted).
"""
import hashlib, json, os, subprocess, sys

root = os.getcwd()
cp = root + "/hack/controlplane"
PLAN = [
    ("agent (hack/build.sh)", root, "0", "grpcnotrace", False, ["./cmd/nodeagent", "./cmd/nodeagent-container-logger"]),
    ("go vet + go test ./... (with tests)", root, "0", "grpcnotrace", True, ["./..."]),
    ("control plane (4 binaries)", cp, "0", "", False, ["k8s.io/kubernetes/cmd/" + b for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")]),
    ("sample device plugin", cp, "0", "", False, ["k8s.io/kubernetes/test/images/sample-device-plugin"]),
    ("metrics-server (own module)", root + "/hack/metrics-server", "0", "", False, ["sigs.k8s.io/metrics-server/cmd/metrics-server"]),
    ("external-provisioner, external-resizer (own module)", root + "/hack/csi-sidecars", "0", "", False, ["github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner", "github.com/kubernetes-csi/external-resizer/cmd/csi-resizer"]),
    ("external-attacher (own module)", root + "/hack/csi-sidecars/attacher", "0", "", False, ["github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"]),
    ("conformance suite + ginkgo", cp, "0", "", True, ["./conformance", "github.com/onsi/ginkgo/v2/ginkgo"]),
    ("agnhost, nonewprivs", cp, "0", "", False, ["k8s.io/kubernetes/test/images/agnhost", "k8s.io/kubernetes/test/images/nonewprivs"]),
    ("kubeadm", cp, "0", "", False, ["k8s.io/kubernetes/cmd/kubeadm"]),
    ("etcd (own module)", root + "/hack/etcd", "0", "", False, ["go.etcd.io/etcd/server/v3"]),
    ("kube-proxy (own module)", root + "/hack/kube-proxy", "0", "", False, ["k8s.io/kubernetes/cmd/kube-proxy"]),
    ("CoreDNS (own module)", root + "/hack/coredns", "0", "", False, ["."]),
]

seen = set()
for name, d, cgo, tags, test, pkgs in PLAN:
    cmd = ["go", "list", "-e", "-deps", "-json"] + (["-test"] if test else []) + (["-tags", tags] if tags else []) + pkgs
    out = subprocess.run(cmd, cwd=d, env=dict(os.environ, GOFLAGS="", CGO_ENABLED=cgo), capture_output=True, text=True)
    if out.returncode and not out.stdout:
        sys.exit(out.stderr)
    dec, s, i, pk = json.JSONDecoder(), out.stdout, 0, {}
    while True:
        while i < len(s) and s[i].isspace():
            i += 1
        if i >= len(s):
            break
        o, i = dec.raw_decode(s, i)
        pk[o["ImportPath"]] = o
    flags, memo = f"cgo={cgo} tags={tags} trimpath", {}

    def key(p):
        if p not in memo:
            o = pk[p]
            m = o.get("Module") or {}
            # The go command keys a replaced module's packages by the
            # required version and the replacement both.
            ver = m.get("Version", "") + "=>" + (m.get("Replace") or {}).get("Version", "")
            deps = sorted(key(x) for x in o.get("Imports", []) if x in pk)
            memo[p] = hashlib.sha256(f"{flags}|{p}@{m.get('Path', 'std')}{ver}|{','.join(deps)}".encode()).hexdigest()
        return memo[p]

    mine = {key(p) for p in pk}
    print(f"{name:40s} {len(mine):6d} packages, {len(mine - seen):6d} compiled by no build above")
    seen |= mine
print(f"{'package compilations of a cold run':40s} {len(seen):6d}")
