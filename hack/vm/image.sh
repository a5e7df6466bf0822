#!/usr/bin/env bash
# image.sh: build (once) and print the directory of the cgroup v2 guest's
# boot files (issue 27): vmlinuz, initrd.img and root.img, a raw ext4 image
# of a Debian bookworm root with its stock kernel (linux-image-amd64),
# systemd (which mounts the unified cgroup v2 hierarchy, bookworm's
# default), Debian's runc, and containerd 2.x as the project builds it
# (hack/build-containerd.sh) as containerd.service.
#
# Two stages, each cached under ${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/vm
# and keyed by its inputs, built in a temporary directory and renamed into
# place (an interrupted build leaves nothing half-made behind):
#   base-<hash of this file's base section>/root   the debootstrap root
#   image-<hash of base key, this file, guest/, containerd>/   the boot files
# The image is built with `mkfs.ext4 -d` from a copy of the root: no loop
# device, no mount. It is never written by a run: hack/vm/boot.sh boots it
# with -snapshot, and the per-run files (the nodeagent .deb, kubeconfig,
# test image) reach the guest through a 9p share.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${NODEAGENT_CACHE_DIR:-/var/cache/nodeagent-dev}/vm
log() { printf '%s vm-image: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- base: bump BASE_VERSION when the package list or the base setup changes.
BASE_VERSION=bookworm-v1
PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,linux-image-amd64,initramfs-tools,zstd,runc,iproute2,procps,ca-certificates
BASE=$CACHE/base-$(printf '%s\n' "$BASE_VERSION" "$PACKAGES" | sha256sum | cut -c1-16)

mkdir -p "$CACHE"
if [[ ! -x $BASE/root/lib/systemd/systemd ]]; then
	command -v debootstrap >/dev/null || { echo "debootstrap not installed (hack/ensure-deps.sh)" >&2; exit 1; }
	MIRROR=${NODEAGENT_DEBIAN_MIRROR:-$(sed -n 's/^ *URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
	MIRROR=${MIRROR:-http://deb.debian.org/debian}
	TMP=$(mktemp -d "$CACHE/.base.XXXXXX")
	trap 'rm -rf --one-file-system "$TMP"' EXIT
	log "debootstrap bookworm with linux-image-amd64 from $MIRROR (a few minutes, cached afterwards in $BASE)"
	t=$SECONDS
	# INITRD=No: no initramfs in the base. Without it the kernel's postinst
	# hook (/etc/kernel/postinst.d/initramfs-tools: update-initramfs -c) and
	# then initramfs-tools' deferred trigger (its postinst, "triggered":
	# update-initramfs -u) each build a MODULES=most initramfs of every
	# module (30 MB, zstd), the slowest part of a cold base by far, and
	# neither is used: the image stage builds the small one the guest
	# boots. With the hook skipped, the trigger finds no initramfs to update
	# (update-initramfs -u only updates existing ones) and does nothing.
	# (The base's key does not change with this: the image built from it is
	# the same, so an existing cached base stays valid.)
	INITRD=No debootstrap --variant=minbase --include="$PACKAGES" bookworm "$TMP/root" "$MIRROR" >"$TMP/debootstrap.log" 2>&1 || {
		tail -n 30 "$TMP/debootstrap.log" >&2
		exit 1
	}
	if ls "$TMP/root/boot/"initrd.img-* >/dev/null 2>&1; then
		log "warning: debootstrap built an initramfs despite INITRD=No (a slower cold base; see image.sh)"
	fi
	rm -rf "$TMP/root/var/cache/apt/archives/"*.deb "$TMP/root/var/lib/apt/lists/"*
	mv -T "$TMP" "$BASE" 2>/dev/null || [[ -x $BASE/root/lib/systemd/systemd ]] || { echo "cannot move $TMP to $BASE" >&2; exit 1; }
	trap - EXIT
	log "base root in $((SECONDS - t))s"
fi

# (--base-only: stop here, e.g. to warm the cache while containerd builds)
[[ ${1:-} != --base-only ]] || { echo "$BASE"; exit 0; }

# --- image: containerd 2.x and the guest's configuration (hack/vm/guest).
# NODEAGENT_VM_CONTAINERD_DIR (containerd and containerd-shim-runc-v2 from
# elsewhere, e.g. Debian's 1.6 in /usr/bin) is for working on the guest
# itself while containerd 2.x builds; the test uses the default.
CTRD_DIR=${NODEAGENT_VM_CONTAINERD_DIR:-$("$ROOT/hack/build-containerd.sh" 2>/dev/null | tail -n1)}
[[ -x $CTRD_DIR/containerd ]] || { echo "hack/build-containerd.sh did not produce containerd" >&2; exit 1; }
KEY=$( {
	echo "$BASE"
	cat "$HERE/image.sh"
	(cd "$HERE/guest" && find . -type f | sort | xargs sha256sum)
	sha256sum "$CTRD_DIR/containerd" "$CTRD_DIR/containerd-shim-runc-v2" | cut -d' ' -f1
	sha256sum "$(command -v ctr)" | cut -d' ' -f1
} | sha256sum | cut -c1-16)
IMG=$CACHE/image-$KEY
if [[ -s $IMG/root.img && -s $IMG/vmlinuz && -s $IMG/initrd.img ]]; then
	echo "$IMG"
	exit 0
fi
log "building $IMG"
t=$SECONDS
TMP=$(mktemp -d "$CACHE/.image.XXXXXX")
trap 'rm -rf --one-file-system "$TMP"' EXIT
R=$TMP/root
cp -a "$BASE/root" "$R"
cp -a "$HERE/guest/." "$R/"
install -m 0755 "$CTRD_DIR/containerd" "$CTRD_DIR/containerd-shim-runc-v2" "$(command -v ctr)" "$R/usr/local/bin/"
echo nodeagent-vm >"$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nodeagent-vm\n' >"$R/etc/hosts"
: >"$R/etc/machine-id"
printf 'nameserver 10.0.2.3\n' >"$R/etc/resolv.conf"
mkdir -p "$R/host"
# A quiet, quick boot: no gettys, no timers, no apt, no logins, and none of
# the modules systemd loads early for desktops and storage (drm, fuse, loop,
# dm_mod, configfs: each a unit that costs seconds under TCG; `systemd-analyze
# blame` in the guest showed them among the slowest).
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer \
	systemd-timesyncd.service getty@tty1.service serial-getty@ttyS0.service systemd-networkd-wait-online.service \
	man-db.timer logrotate.timer systemd-logind.service \
	modprobe@drm.service modprobe@fuse.service modprobe@loop.service modprobe@dm_mod.service modprobe@configfs.service; do
	ln -sf /dev/null "$R/etc/systemd/system/$u"
done
chroot "$R" systemctl enable systemd-networkd.service containerd.service na-vm-runner.service >/dev/null 2>&1
# The initramfs needs just the virtio disk (MODULES=list, not the chroot's
# "most", which would take TCG many seconds to unpack).
printf 'MODULES=list\nCOMPRESS=gzip\n' >"$R/etc/initramfs-tools/conf.d/nodeagent-vm.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >>"$R/etc/initramfs-tools/modules"
kver=$(basename "$(ls -d "$R"/lib/modules/* | sort -V | tail -n1)")
chroot "$R" update-initramfs -c -k "$kver" >"$TMP/initramfs.log" 2>&1 || chroot "$R" update-initramfs -u -k "$kver" >>"$TMP/initramfs.log" 2>&1 || {
	cat "$TMP/initramfs.log" >&2
	exit 1
}
mkdir -p "$TMP/out"
cp "$R/boot/vmlinuz-$kver" "$TMP/out/vmlinuz"
cp "$R/boot/initrd.img-$kver" "$TMP/out/initrd.img"
echo "$kver" >"$TMP/out/kernel-version"
# 4 GiB, sparse: room for the pods' images and logs.
# stdout is this script's answer (the image directory): mkfs says "Creating regular file ..." there even with -q.
mkfs.ext4 -q -F -L root -d "$R" "$TMP/out/root.img" 4G >&2
mv -T "$TMP/out" "$IMG" 2>/dev/null || [[ -s $IMG/root.img ]] || { echo "cannot move the image to $IMG" >&2; exit 1; }
log "image in $((SECONDS - t))s: $(du -sh --apparent-size "$IMG/root.img" | cut -f1) apparent, $(du -sh "$IMG/root.img" | cut -f1) used, kernel $kver"
# Each change of the guest or containerd makes a new image (760 MB): keep
# this one and the one before it (a test of another tree may still boot it),
# so that stale images do not fill the disk (the agents' imagefs eviction
# threshold is 15% free).
ls -dt "$CACHE"/image-* 2>/dev/null | tail -n +3 | while read -r old; do
	[[ $old != "$IMG" ]] && rm -rf --one-file-system "$old"
done
echo "$IMG"
