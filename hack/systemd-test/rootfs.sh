#!/usr/bin/env bash
# rootfs.sh: build (once) and print the path of a cached Debian bookworm root
# with systemd, used by hack/test-systemd.sh to boot a real systemd with
# systemd-nspawn.
#
# The root lives outside the repository (NODEAGENT_ROOTFS_CACHE, default
# /var/cache/nodeagent-test) under a name keyed by ROOTFS_VERSION, so a change
# of the package list below makes a new root instead of reusing a stale one.
# It is built in a temporary directory next to the final one and renamed into
# place, so an interrupted build never leaves a half-made root behind, and two
# concurrent builders cannot see each other's half-made roots (the loser of the
# rename race throws its copy away). The cached root is never booted directly:
# the test boots a throw-away copy (systemd-nspawn --ephemeral).
#
# The apt mirror is the one the host uses (first http(s) deb.debian.org-like
# URI for the "bookworm" suite in /etc/apt/sources.list{,.d}), override with
# NODEAGENT_DEBIAN_MIRROR.
set -euo pipefail

# Bump when the package list or the setup below changes.
ROOTFS_VERSION=bookworm-v1
PACKAGES=systemd,systemd-sysv,dbus,ca-certificates,iproute2,procps

CACHE=${NODEAGENT_ROOTFS_CACHE:-/var/cache/nodeagent-test}
FINAL=$CACHE/$ROOTFS_VERSION-rootfs

log() { printf '%s rootfs: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x $FINAL/lib/systemd/systemd ]]; then
	echo "$FINAL"
	exit 0
fi

host_mirror() {
	local f uri
	# deb822 .sources files: "URIs:" followed by "Suites: bookworm ..."
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		uri=$(awk '
			/^URIs:/ { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm" && uri != "") { print uri; exit } }
			/^$/ { uri = "" }' "$f")
		if [[ -n $uri ]]; then echo "$uri"; return; fi
	done
	# one-line format: deb [opts] URI bookworm main
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		uri=$(awk '$1 == "deb" { sub(/\[[^]]*\] */, ""); if ($3 == "bookworm") { print $2; exit } }' "$f")
		if [[ -n $uri ]]; then echo "$uri"; return; fi
	done
	echo http://deb.debian.org/debian
}

MIRROR=${NODEAGENT_DEBIAN_MIRROR:-$(host_mirror)}
command -v debootstrap >/dev/null || { echo "debootstrap not installed (apt-get install debootstrap)" >&2; exit 1; }

mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.$ROOTFS_VERSION.XXXXXX")
trap 'rm -rf --one-file-system "$TMP"' EXIT

log "debootstrap bookworm from $MIRROR into $TMP (takes a few minutes, cached afterwards)"
start=$SECONDS
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$TMP/root" "$MIRROR" >"$TMP/debootstrap.log" 2>&1 || {
	tail -n 30 "$TMP/debootstrap.log" >&2
	exit 1
}
R=$TMP/root

# A container-friendly, quiet boot: no getty, no hostname/machine-id surprises,
# no apt timers waking up mid-test.
echo nodeagent-test >"$R/etc/hostname"
: >"$R/etc/machine-id"
rm -f "$R/etc/resolv.conf" && cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer \
	systemd-timesyncd.service getty@tty1.service console-getty.service systemd-networkd-wait-online.service; do
	ln -sf /dev/null "$R/etc/systemd/system/$u"
done
# No network manager: the container shares the host network, which is already
# up, so network-online.target (which nothing delays here) is reached at once.
rm -rf "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"*

mkdir -p "$(dirname "$FINAL")"
if mv -T "$R" "$FINAL" 2>/dev/null; then
	log "cached root at $FINAL in $((SECONDS - start))s"
elif [[ -x $FINAL/lib/systemd/systemd ]]; then
	log "another builder won the race, using $FINAL"
else
	echo "rootfs: cannot move $R to $FINAL" >&2
	exit 1
fi
echo "$FINAL"
