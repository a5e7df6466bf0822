#!/usr/bin/env bash
# Local control plane + private containerd: hack/localcluster.sh up|down|status|env|node-kubeconfig NAME
# `up` installs missing Debian packages and builds the control plane first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "localcluster: must run as root (containerd, runc and cgroups need it): run with sudo" >&2
  exit 1
fi
if [ "${1:-}" = up ]; then
  hack/ensure-deps.sh
  hack/build-controlplane.sh
fi
mkdir -p _output/bin
go build -o _output/bin/localcluster ./hack/localcluster
exec _output/bin/localcluster "$@"
