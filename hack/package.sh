#!/usr/bin/env bash
# package.sh: build the nodeagent deb and rpm packages into dist/ (or $DIST).
#
#   hack/package.sh                       # amd64 and arm64, deb and rpm
#   ARCHES=amd64 hack/package.sh          # just one architecture
#   NODEAGENT_VERSION=1.2.3 hack/package.sh
#
# The version comes from `git describe --tags --always --dirty`, made valid for
# both dpkg and rpm (no '-' in it): v1.2.0 -> 1.2.0, v1.2.0-3-gabc1234-dirty ->
# 1.2.0+3.gabc1234.dirty; without a tag 0.0.0+<commits>.g<hash>[.dirty], so
# later commits sort higher; outside git 0.0.0+unknown. The binary is built
# with -X main.version=<the same string>, so `nodeagent version` and the
# package agree.
#
# Output: dist/nodeagent_<version>_<arch>.deb and
# dist/nodeagent-<version>.<rpmarch>.rpm (rpmarch x86_64, aarch64), plus
# dist/SHA256SUMS. nfpm comes from hack/tools (its own Go module), built into
# _output/bin/nfpm.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DIST=${DIST:-$ROOT/dist}
ARCHES=${ARCHES:-amd64 arm64}
OUT=$ROOT/_output
# Where the binaries and derived units are put together: its own directory
# for a caller that may run beside another packaging (hack/test-vm.sh).
PKGWORK=${NODEAGENT_PACKAGE_WORK:-$OUT/package}
NFPM=$OUT/bin/nfpm

log() { printf '%s package: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# version prints the package version; see the header.
version() {
	local d count
	if ! d=$(git describe --tags --always --dirty 2>/dev/null); then
		echo 0.0.0+unknown
		return
	fi
	if git describe --tags --abbrev=0 >/dev/null 2>&1; then
		# v1.2.0, v1.2.0-dirty, v1.2.0-3-gabc1234, v1.2.0-3-gabc1234-dirty
		d=${d#v}
		if [[ $d =~ ^(.*)-([0-9]+)-g([0-9a-f]+)(-dirty)?$ ]]; then
			d="${BASH_REMATCH[1]}+${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}${BASH_REMATCH[4]:+.dirty}"
		elif [[ $d =~ ^(.*)-dirty$ ]]; then
			d="${BASH_REMATCH[1]}+dirty"
		fi
	else
		# No tag: --always gives the abbreviated hash.
		count=$(git rev-list --count HEAD 2>/dev/null || echo 0)
		[[ $d =~ ^([0-9a-f]+)(-dirty)?$ ]] || { echo "0.0.0+unknown"; return; }
		d="0.0.0+${count}.g${BASH_REMATCH[1]}${BASH_REMATCH[2]:+.dirty}"
	fi
	echo "$d"
}

VERSION=${NODEAGENT_VERSION:-$(version)}
if ! [[ $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	echo "package: version '$VERSION' is not valid for both dpkg and rpm (want [0-9][A-Za-z0-9.+~]*)" >&2
	exit 1
fi
export NODEAGENT_VERSION=$VERSION

if [[ ! -x $NFPM || $NFPM -ot hack/tools/go.mod ]]; then
	log "building nfpm (hack/tools)"
	(cd hack/tools && go build -o "$NFPM" github.com/goreleaser/nfpm/v2/cmd/nfpm)
fi

mkdir -p "$DIST" "$PKGWORK"
# The rpm unit differs from the Debian one only in its EnvironmentFile.
export NODEAGENT_RPM_UNIT=$PKGWORK/nodeagent.rpm.service
sed 's|^EnvironmentFile=-/etc/default/nodeagent$|EnvironmentFile=-/etc/sysconfig/nodeagent|' \
	packaging/nodeagent.service >"$NODEAGENT_RPM_UNIT"
grep -q '^EnvironmentFile=-/etc/sysconfig/nodeagent$' "$NODEAGENT_RPM_UNIT" || {
	echo "package: could not derive the rpm unit from packaging/nodeagent.service" >&2
	exit 1
}
# The same for kubelet.service (nodeagent in kubelet's place, docs/joining.md).
export NODEAGENT_RPM_KUBELET_UNIT=$PKGWORK/kubelet.rpm.service
sed 's|^EnvironmentFile=-/etc/default/kubelet$|EnvironmentFile=-/etc/sysconfig/kubelet|' \
	packaging/kubelet.service >"$NODEAGENT_RPM_KUBELET_UNIT"
grep -q '^EnvironmentFile=-/etc/sysconfig/kubelet$' "$NODEAGENT_RPM_KUBELET_UNIT" || {
	echo "package: could not derive the rpm unit from packaging/kubelet.service" >&2
	exit 1
}

# Both unit variants must pass systemd-analyze verify (warnings count as
# failures). verify insists that ExecStart's binary exists, so check a copy
# that points at one that does.
if command -v systemd-analyze >/dev/null; then
	for unit in packaging/nodeagent.service "$NODEAGENT_RPM_UNIT" packaging/kubelet.service "$NODEAGENT_RPM_KUBELET_UNIT"; do
		tmp=$(mktemp -d)
		name=nodeagent.service
		[[ $unit == *kubelet* ]] && name=kubelet.service
		sed 's|/usr/bin/nodeagent|/bin/true|; s|/usr/bin/kubelet|/bin/true|' "$unit" >"$tmp/$name"
		out=$(systemd-analyze verify "$tmp/$name" 2>&1) || true
		rm -rf "$tmp"
		if [[ -n $out ]]; then
			echo "package: systemd-analyze verify $unit:" >&2
			echo "$out" >&2
			exit 1
		fi
	done
fi

for arch in $ARCHES; do
	case $arch in
	amd64) rpmarch=x86_64 ;;
	arm64) rpmarch=aarch64 ;;
	*)
		echo "package: unsupported architecture $arch" >&2
		exit 1
		;;
	esac
	bin=$PKGWORK/$arch/nodeagent
	# The per-container log writer the agent finds beside itself.
	logger=$PKGWORK/$arch/nodeagent-container-logger
	log "building nodeagent $VERSION for linux/$arch"
	# make build's build: one definition (hack/build.sh), the same binaries.
	GOARCH=$arch hack/build.sh "$PKGWORK/$arch"
	for pkg in deb rpm; do
		if [[ $pkg == deb ]]; then
			target=$DIST/nodeagent_${VERSION}_${arch}.deb
		else
			target=$DIST/nodeagent-${VERSION}.${rpmarch}.rpm
		fi
		GOARCH=$arch NODEAGENT_BINARY=$bin NODEAGENT_LOGGER_BINARY=$logger "$NFPM" package --config packaging/nfpm.yaml \
			--packager "$pkg" --target "$target" >/dev/null
		log "wrote ${target#"$ROOT"/}"
	done
done

(cd "$DIST" && sha256sum -- *.deb *.rpm >SHA256SUMS)
