#!/usr/bin/env bash
# build.sh: the one definition of how the agent's binaries are built. `make
# build` and hack/package.sh both call it, so what is measured, tested and
# shipped is the same binary (hack/test-systemd.sh compares them byte for
# byte; hack/check-build.sh, run by `make lint`, fails when a build bypasses
# this script or the linker's dead-code elimination is off).
#
#   hack/build.sh OUTDIR [BINARY...]   # default: nodeagent nodeagent-container-logger
#   NODEAGENT_VERSION=1.2.3 GOARCH=arm64 hack/build.sh _output/package/arm64
#   hack/build.sh --print              # the flags, one per line
#
# NODEAGENT_VERSION is stamped into main.version (default: hack/package.sh's
# version). NODEAGENT_EXTRA_LDFLAGS adds linker flags for a check
# (hack/check-build.sh passes -dumpdep); nothing else changes the build.
#
# Why these flags (issue 16, docs/benchmarks.md "Binary size"):
#   CGO_ENABLED=0  with cgo, the containerd client's import of Go's plugin
#                  package makes the linker export every symbol (+19 MB);
#   -trimpath      reproducible: no build paths in the binary;
#   -s -w          no symbol table or DWARF;
#   grpcnotrace    drops gRPC's golang.org/x/net/trace, whose html/template
#                  calls methods by name (reflect) and so switches the
#                  linker's dead-code elimination of methods off.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

GO_TAGS=grpcnotrace
GO_FLAGS=(-trimpath -tags "$GO_TAGS")
export CGO_ENABLED=0
export GOOS=linux

# --goenv: the same flag set for every other go command on the agent's module
# (the Makefile exports it: go vet, go test and the test programs then reuse
# the packages this build compiled; a cold `make test` compiles each once).
if [[ ${1:-} == --goenv ]]; then
	printf '%s\n' "CGO_ENABLED=$CGO_ENABLED" "GOFLAGS=-trimpath -tags=$GO_TAGS"
	exit 0
fi
if [[ ${1:-} == --print ]]; then
	printf '%s\n' "CGO_ENABLED=$CGO_ENABLED" "GOOS=$GOOS" "${GO_FLAGS[@]}" "-ldflags=-s -w -X main.version=..."
	exit 0
fi
if [[ $# -lt 1 || $1 == -* ]]; then
	echo "usage: hack/build.sh OUTDIR [nodeagent|nodeagent-container-logger]..." >&2
	exit 2
fi
out=$1
shift
bins=("$@")
[[ ${#bins[@]} -gt 0 ]] || bins=(nodeagent nodeagent-container-logger)

if [[ -z ${NODEAGENT_VERSION:-} ]]; then
	NODEAGENT_VERSION=$(
		source <(sed -n '/^version() {/,/^}/p' hack/package.sh)
		version
	)
fi
ldflags="-s -w -X main.version=$NODEAGENT_VERSION ${NODEAGENT_EXTRA_LDFLAGS:-}"
mkdir -p "$out"
for b in "${bins[@]}"; do
	case $b in
	nodeagent | nodeagent-container-logger) ;;
	*)
		echo "build.sh: unknown binary $b" >&2
		exit 2
		;;
	esac
	go build "${GO_FLAGS[@]}" -ldflags "$ldflags" -o "$out/$b" "./cmd/$b"
done
