#!/usr/bin/env bash
# check-build.sh: the build checks of issue 16, run by `make lint` (and so by
# `make test`, hack/test.sh):
#   1. every build of the agent goes through hack/build.sh: the Makefile's
#      build target and hack/package.sh call it and run no `go build` of
#      their own, so `make build` and the packages cannot drift apart
#      (hack/test-systemd.sh also compares the two binaries byte for byte);
#   2. the linker's dead-code elimination of methods is on in that build:
#      hack/build.sh with -dumpdep, judged by hack/dcecheck, which names the
#      reflective call that switched it off and how it was reached;
#   3. no code of a package cut from the binary to keep it small is linked
#      again (hack/dcecheck's unwanted list, same -dumpdep output).
# About a minute with a warm build cache (one link of the agent).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() {
	echo "check-build: $*" >&2
	exit 1
}

# 1. One definition.
recipe=$(make -s -n build BIN=/nonexistent VERSION=0.0.0)
grep -q 'hack/build.sh /nonexistent' <<<"$recipe" || fail "make build does not call hack/build.sh: $recipe"
! grep -q 'go build' <<<"$recipe" || fail "make build runs go build itself: $recipe"
grep -q '^[[:space:]]*GOARCH=$arch hack/build.sh ' hack/package.sh || fail "hack/package.sh does not build through hack/build.sh"
# nfpm (hack/tools) is the only thing package.sh builds itself.
if grep -n 'go build' hack/package.sh | grep -v 'github.com/goreleaser/nfpm'; then
	fail "hack/package.sh runs go build itself (above): build the agent with hack/build.sh"
fi

# 2. Dead-code elimination.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NODEAGENT_VERSION=0.0.0+check NODEAGENT_EXTRA_LDFLAGS=-dumpdep hack/build.sh "$tmp" nodeagent 2>"$tmp/dumpdep" ||
	{ tail -20 "$tmp/dumpdep" >&2; fail "hack/build.sh failed"; }
go run ./hack/dcecheck "$tmp/dumpdep"
echo "check-build: ok ($(stat -c %s "$tmp/nodeagent") bytes, linux/$(go env GOARCH))"
