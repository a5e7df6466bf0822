#!/usr/bin/env bash
# Installs the Debian packages the local cluster and the tests need, once.
# Idempotent: does nothing when everything is present.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "ensure-deps: must run as root to install packages (containerd, cgroups and nspawn need root anyway): run with sudo" >&2
  exit 1
fi

# command -> Debian package. etcd is not one of them: the local control plane
# runs etcd 3.6 built from its Go module (hack/build-etcd.sh); Debian's
# etcd-server is 3.4, which Kubernetes 1.34 does not support.
declare -A need=(
  [containerd]=containerd
  [runc]=runc
  [busybox]=busybox-static
  [debootstrap]=debootstrap
  [systemd-nspawn]=systemd-container
  [rpm]=rpm
  [gcc]=gcc # go test -race needs cgo
  [iptables-save]=iptables # portmap's hostPort rules; the network tests compare iptables-save
  [ip]=iproute2            # the network tests remove their bridges
  [make]=make              # the conformance e2e images' busybox is built from source
  [bzip2]=bzip2            # its release tarball
  [curl]=curl              # fetched once from Debian's mirror
  [qemu-system-x86_64]=qemu-system-x86 # the cgroup v2 guest (hack/vm, TCG: no KVM needed)
  [mkfs.ext4]=e2fsprogs                # its disk image (mkfs.ext4 -d, no loop device)
  [openssl]=openssl                    # hack/test-join.sh: the node's certificate against its CSR's
  [python3]=python3                    # hack/test-join.sh: reads the CSRs
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
# busybox-static specifically (a dynamic busybox cannot run inside an empty image).
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
# The reference CNI plugins (bridge, host-local, portmap, loopback,
# bandwidth) in /usr/lib/cni, for the network tests and the local cluster's
# pod network.
dpkg -s containernetworking-plugins >/dev/null 2>&1 || missing+=(containernetworking-plugins)
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "ensure-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d keeps the packages' own services (host containerd) from starting.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get update -qq >/tmp/nodeagent-apt.log 2>&1 || ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/nodeagent-apt.log 2>&1; then
  echo "ensure-deps: could not install ${missing[*]} with apt-get (see /tmp/nodeagent-apt.log): install them by hand" >&2
  exit 1
fi
