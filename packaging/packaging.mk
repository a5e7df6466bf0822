# packaging.mk: packaging targets, included by the top-level Makefile.
#
#   make packages       deb + rpm for amd64 and arm64 into dist/ (ARCHES=amd64 for one)
#   make test-systemd   install the .deb into a Debian booted with systemd-nspawn and
#                       check start/READY, watchdog restart, stop, upgrade and purge;
#                       inspect and scratch-install the .rpm (hack/test-systemd.sh)

.PHONY: packages test-systemd

packages:
	hack/package.sh

test-systemd:
	hack/test-systemd.sh
