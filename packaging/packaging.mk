# packaging.mk: packaging targets, included by the top-level Makefile.
#
#   make packages       deb + rpm for amd64 and arm64 into dist/ (ARCHES=amd64 for one)
#   make test-systemd   install the .deb into a Debian booted with systemd-nspawn and
#                       check start/READY, watchdog restart, stop, upgrade and purge;
#                       inspect and scratch-install the .rpm (hack/test-systemd.sh)
#   make test-join      `kubeadm join` (kubeadm built from the pin, hack/build-kubeadm.sh)
#                       on that Debian with the .deb installed: nodeagent as kubelet.service
#                       joins, goes Ready, runs a pod; restart and `kubeadm reset`
#                       (hack/test-join.sh, docs/joining.md)

.PHONY: packages test-systemd test-join

packages:
	hack/package.sh

test-systemd:
	hack/test-systemd.sh

test-join: controlplane
	hack/test-join.sh
