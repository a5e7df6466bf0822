#!/usr/bin/env bash
# The vs-kubelet benchmark in one command (hack/bench/vs-kubelet/main.go says
# what it measures): builds nodeagent (make build), the control plane and
# etcd (cached), kubelet from the pinned k8s.io/kubernetes (cached,
# hack/build-kubelet.sh) and upstream's pause for kubelet's sandbox image,
# then runs the bench. Needs root, Debian's containerd, runc, busybox-static,
# containernetworking-plugins and gcc (hack/ensure-deps.sh). Arguments go to
# the bench (e.g. -rounds 1 -bursts 30).
set -euo pipefail
cd "$(dirname "$0")/../../.."
hack/ensure-deps.sh
make -s build
hack/build-controlplane.sh
hack/build-kubelet.sh
out=_output/vs-kubelet
mkdir -p "$out"
kdir=$(cd hack/controlplane && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
if [ ! -x "$out/pause" ]; then
  gcc -Os -Wall -Werror -static -DVERSION=v3.10.1-nodeagent -o "$out/pause.tmp" "$kdir/build/pause/linux/pause.c"
  mv "$out/pause.tmp" "$out/pause"
fi
nice -n 10 go build -o "$out/vs-kubelet" ./hack/bench/vs-kubelet
exec "$out/vs-kubelet" -kubelet _output/bin/kubelet -nodeagent _output/bin/nodeagent -pause "$out/pause" "$@"
