#!/usr/bin/env bash
# make test: every test against one shared, freshly started local cluster
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd).
# In order: make lint; go test ./... (unit, integration, e2e; pleg, pods and
# heartbeat again under -race); the fault suite (its own cluster); the config
# fuzzer, briefly; runtime and pleg against containerd 2.x; the packages
# under systemd-nspawn; kubeadm join with the package as kubelet. Beside
# the phases after go test, on a cluster of its own: the upstream
# conformance specs (NodeLease and the [NodeConformance] specs of
# test/e2e/common/node with a short form of the feature specs, then the
# user namespace specs on containerd 2.x; judged by
# hack/conformance/ratchet), and kubectl top through metrics-server (e2e
# TestKubectlTop, its metrics-server build first) with the StatefulSet and
# the attaching driver on the real CSI sidecars (e2e TestCSIStatefulSet,
# TestCSIAttachRequired, TestCSIMigrationAttach); beside the
# phases after the fault suite: the cgroup v2 guest's short form
# (hack/test-vm.sh --short, qemu, its own control plane), and the
# multi-node cluster's short form (hack/test-multinode.sh: 3 nodeagent
# nodes in network namespaces, kube-proxy, CoreDNS, a node stopped).
# docs/testing.md has the table and the budget.
# Set SKIP_SYSTEMD=1, SKIP_JOIN=1, SKIP_VM=1, SKIP_CONFORMANCE=1,
# SKIP_MULTINODE=1 or SKIP_CONTAINERD_CURRENT=1 to leave a phase out while
# iterating.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
# The agent's flag set for every go command below (the Makefile's, also when
# this script runs on its own): see hack/build.sh --goenv.
while IFS= read -r kv; do export "${kv?}"; done < <(hack/build.sh --goenv)
# Each phase's duration is printed at the end (docs/testing.md: the CI budget).
# Beside the wall time, the CPU time of the phase's processes (user+system of
# the children this shell waited for; the shared cluster's daemons are not in
# it): what tells a phase that waits, and can overlap another, from one that
# computes.
durations=()
phase_name=
phase_start=$t0
cpu_ticks() { awk '{print $16 + $17}' /proc/$$/stat; }
phase_cpu=$(cpu_ticks)
end_phase() {
  if [ -n "$phase_name" ]; then
    durations+=("$(printf '%5ds  %5ds cpu  %s' $(( $(date +%s) - phase_start )) \
      $(( ($(cpu_ticks) - phase_cpu) / $(getconf CLK_TCK) )) "$phase_name")")
  fi
  phase_name=
}
phase() {
  end_phase
  phase_name=$*
  phase_start=$(date +%s)
  phase_cpu=$(cpu_ticks)
  echo; echo "=== test: $* ($(( phase_start - t0 ))s elapsed)"
}

# Under make (make test, CI), the Makefile's prerequisites (the build, the
# control plane, the sample device plugin) ran before this script: their
# wall time is make's age, their CPU what make's reaped children used
# (user+system, their own children included). It is the first line of the
# table, so that a cold run's whole cost is measured, not estimated.
if [ "$(cat "/proc/$PPID/comm" 2>/dev/null)" = make ]; then
  read -r make_start make_cpu < <(awk '{print $22, $16 + $17}' "/proc/$PPID/stat")
  durations+=("$(printf '%5ds  %5ds cpu  %s' $(( $(awk '{print int($1)}' /proc/uptime) - make_start / $(getconf CLK_TCK) )) \
    $(( make_cpu / $(getconf CLK_TCK) )) "make's prerequisites (build, controlplane, sample-device-plugin)")")
fi
go build -o _output/bin/localcluster ./hack/localcluster
go build -o _output/bin/gotestfilter ./hack/gotestfilter
# A short directory: containerd's socket path must fit a unix socket address.
dir=$(mktemp -d /tmp/na-test.XXXXXX)
# Phases that run beside the others (each on a cluster of its own), see
# beside() below; their clusters are in $dir/beside-*.
bg_pgids=() bg_names=() bg_logs=()
cleanup() {
  local p
  [ ! -s "$dir/vm-base.pgid" ] || kill -TERM -- "-$(cat "$dir/vm-base.pgid")" 2>/dev/null || true
  [ ! -s "$dir/rootfs.pgid" ] || kill -TERM -- "-$(cat "$dir/rootfs.pgid")" 2>/dev/null || true
  [ ! -s "$dir/fuzz-build.pgid" ] || kill -TERM -- "-$(cat "$dir/fuzz-build.pgid")" 2>/dev/null || true
  [ ! -s "$dir/csi-sidecars.pgid" ] || kill -TERM -- "-$(cat "$dir/csi-sidecars.pgid")" 2>/dev/null || true
  for p in "${bg_pgids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${bg_pgids[@]}"; do
    for _ in $(seq 60); do kill -0 -- "-$p" 2>/dev/null || break; sleep 1; done
  done
  for p in "$dir"/beside-*/; do
    [ -d "$p" ] && _output/bin/localcluster down --dir "$p" || true
  done
  _output/bin/localcluster down --dir "$dir" || true
  rm -rf "$dir"
}
trap cleanup EXIT
phase "starting the local cluster in $dir"
_output/bin/localcluster up --dir "$dir" >/dev/null
# kubernetes-csi's external-provisioner, external-resizer and
# external-attacher (hack/build-csi-sidecars.sh, cached; cold about 4.5
# minutes for the first two and 6 more for external-attacher, a module of
# its own, and as much CPU on 2 cores): their users, the conformance phase's
# storage specs and e2e TestCSIStatefulSet, TestCSIAttachRequired and
# TestCSIMigrationAttach, run
# beside the phases after go test, so their cold
# build starts now, niced, and overlaps lint and go test; those users call
# the script again, which waits for this build (its lock) or copies the
# cached programs. In a process group of its own, which cleanup stops.
(
  set -m
  (
    nice -n 10 hack/build-csi-sidecars.sh >"$dir/csi-sidecars.log" 2>&1 </dev/null
    echo $? >"$dir/csi-sidecars.rc"
  ) &
  echo $! >"$dir/csi-sidecars.pgid"
)
# The cgroup v2 guest's Debian base (hack/vm/image.sh, cached): built cold
# in about 30 minutes of mostly sequential downloads, so it starts now and
# overlaps everything before the guest phase (vm_beside), which waits for it.
# In a process group of its own, which cleanup stops.
if [ -z "${SKIP_VM:-}" ]; then
  (
    set -m
    (
      rc=0
      nice -n 10 hack/vm/image.sh --base-only >"$dir/vm-base.log" 2>&1 </dev/null || rc=$?
      echo "$rc" >"$dir/vm-base.rc.tmp" && mv "$dir/vm-base.rc.tmp" "$dir/vm-base.rc"
    ) &
    echo $! >"$dir/vm-base.pgid"
  )
fi
# Likewise the Debian root the nspawn phases boot (hack/systemd-test/rootfs.sh,
# cached; cold a few minutes of downloads, which overlap the compiling phases
# instead of adding to the packages phase). rootfs.sh builds into a temporary
# directory and renames it into place, so the phase's own call, if it comes
# first, cannot see half a root.
if [ -z "${SKIP_SYSTEMD:-}" ] || [ -z "${SKIP_JOIN:-}" ]; then
  (
    set -m
    (
      rc=0
      nice -n 10 hack/systemd-test/rootfs.sh >/dev/null 2>"$dir/rootfs.log" </dev/null || rc=$?
      echo "$rc" >"$dir/rootfs.rc.tmp" && mv "$dir/rootfs.rc.tmp" "$dir/rootfs.rc"
    ) &
    echo $! >"$dir/rootfs.pgid"
  )
fi
# rootfs_wait: before the nspawn phases, wait (bounded) for that build, so
# that they do not start a second one; if it failed, they build it again and
# say why.
rootfs_wait() {
  local i
  [ -s "$dir/rootfs.pgid" ] || return 0
  for i in $(seq 1800); do
    [ -e "$dir/rootfs.rc" ] && break
    sleep 1
  done
  [ "$(cat "$dir/rootfs.rc" 2>/dev/null)" = 0 ] || { echo "building the nspawn root in the background failed:"; cat "$dir/rootfs.log"; }
  return 0
}
export NODEAGENT_CLUSTER_DIR=$dir
export NODEAGENT_BIN=$PWD/_output/bin/nodeagent

status=0

# beside NAME CMD...: runs CMD now, in the background, in a process group of
# its own, its output to a file; join_beside waits for every such phase,
# prints its output and adds its wall and CPU time to the table. Used for
# phases that mostly wait (on pods, timeouts, a booting guest) and bring a
# cluster of their own, so that they overlap the phases that compute. The
# phase is not this shell's child (a subshell starts it and exits), so its
# CPU time is counted by itself and never lands in the phase it ends during.
beside() {
  local name=$1; shift
  local log=$dir/beside-$((${#bg_pgids[@]} + 1)).log
  echo; echo "=== test: $name: started beside the next phases ($(( $(date +%s) - t0 ))s elapsed; output at the end)"
  (
    set -m
    (
      set +e
      me=$BASHPID # (inside $(...) BASHPID is the substitution's own)
      s=$(date +%s)
      "$@" >"$log" 2>&1 </dev/null
      rc=$?
      echo "$(( $(date +%s) - s )) $(awk '{print $16 + $17}' /proc/$me/stat) $rc" >"$log.tmp"
      mv "$log.tmp" "$log.result"
    ) &
    echo $! >"$log.pgid"
  )
  bg_pgids+=("$(cat "$log.pgid")") bg_names+=("$name") bg_logs+=("$log")
}
join_beside() {
  local i w c rc
  end_phase
  for i in "${!bg_pgids[@]}"; do
    echo; echo "=== test: ${bg_names[$i]} (ran beside the phases above; waiting for it at $(( $(date +%s) - t0 ))s)"
    # Bounded: each such phase has timeouts of its own well inside an hour.
    for _ in $(seq 3600); do
      [ -e "${bg_logs[$i]}.result" ] && break
      kill -0 -- "-${bg_pgids[$i]}" 2>/dev/null || { sleep 1; break; }
      sleep 1
    done
    cat "${bg_logs[$i]}"
    if read -r w c rc <"${bg_logs[$i]}.result" 2>/dev/null; then
      durations+=("$(printf '%5ds  %5ds cpu  %s (beside)' "$w" $(( c / $(getconf CLK_TCK) )) "${bg_names[$i]}")")
      [ "$rc" = 0 ] || { echo "=== test: ${bg_names[$i]} failed (exit status $rc)"; status=1; }
    else
      echo "=== test: ${bg_names[$i]} ended without a result (killed, or still running after an hour)"
      kill -TERM -- "-${bg_pgids[$i]}" 2>/dev/null || true
      status=1
    fi
  done
  bg_pgids=() bg_names=() bg_logs=()
}
# The conformance specs need their node to be the only Ready one in its
# cluster, so beside the e2e tests they get a cluster of their own, with a
# pod network of its own (the shared cluster's nodes take 10.244.0.0/16, the
# network package's tests 10.245.0.0/16).
conformance_beside() {
  local c=$dir/beside-conformance
  _output/bin/localcluster up --dir "$c" --cluster-cidr 10.246.0.0/16 >/dev/null || return 1
  local rc=0
  NODEAGENT_CLUSTER_DIR=$c hack/conformance.sh || rc=$?
  # Then the user namespace specs, on an agent over a private containerd
  # 2.x with runc 1.5 (Debian's 1.6 and 1.1 cannot run them): about 2
  # minutes. The full feature set is `make conformance-features`.
  NODEAGENT_CLUSTER_DIR=$c hack/conformance.sh --set=userns || rc=1
  _output/bin/localcluster down --dir "$c" || true
  return $rc
}
# kubectl top through a real metrics-server (e2e TestKubectlTop, on the
# shared cluster): metrics-server is a module of its own whose cold build
# (about 900 packages no other build shares, ~10 minutes of CPU) would
# otherwise come before the first test; here it compiles, niced, beside the
# fault suite, which mostly waits.
# With it, the e2e tests that run kubernetes-csi's external-provisioner,
# external-resizer and external-attacher (TestCSIStatefulSet,
# TestCSIAttachRequired, TestCSIMigrationAttach), once their build started at the beginning is
# done.
metrics_beside() {
  nice -n 10 hack/build-metrics-server.sh >/dev/null || return 1
  nice -n 10 hack/build-csi-sidecars.sh >/dev/null || return 1
  go test -json -count=1 -timeout 10m -run '^(TestKubectlTop|TestCSIStatefulSet|TestCSIAttachRequired|TestCSIMigrationAttach)$' ./e2e | _output/bin/gotestfilter
}
# The cgroup v2 guest's short form (hack/test-vm.sh --short, docs/vm.md):
# a Debian 12 guest under qemu (software emulation), the agent's .deb as its
# systemd unit, its own control plane in a network namespace. Mostly waiting
# on one emulated CPU, so it runs beside the last phases, once its base is
# built (bounded: the base build has its own download timeouts).
vm_beside() {
  local i
  for i in $(seq 3600); do
    [ -e "$dir/vm-base.rc" ] && break
    sleep 1
  done
  if [ "$(cat "$dir/vm-base.rc" 2>/dev/null)" != 0 ]; then
    cat "$dir/vm-base.log"
    echo "building the guest's Debian base failed (or took over an hour)" >&2
    return 1
  fi
  hack/test-vm.sh --short
}
# gofmt, go vet and the build checks (hack/check-build.sh: one build
# definition, the linker's dead-code elimination on).
phase "make lint"
make lint || status=1
phase "go test (unit, integration, e2e)"
# The PLEG tests lower fs.inotify.max_user_watches for a moment, which would
# starve other packages' watchers: they run on their own, after the rest.
# Through hack/gotestfilter: the plain output of go test, and a failure for
# any test that skipped itself unless hack/expected-skips.txt says why.
# 60 CNI ADD/DEL cycles in the network package's leak test (200 by default,
# NODEAGENT_CNI_CYCLES): what leaks, leaks on every cycle. The e2e tests run
# at go test's default parallelism (GOMAXPROCS, 2 here): at 4, beside the
# conformance specs on a machine at load 25, timing assertions (a preStop's
# 2 s, a CNI retry's back-off) failed.
# TestKubectlTop, TestCSIStatefulSet, TestCSIAttachRequired and
# TestCSIMigrationAttach run later,
# beside (metrics_beside).
pkgs=$(go list ./... | grep -v '/pleg$' | grep -v '/e2e/fault$')
NODEAGENT_CNI_CYCLES=${NODEAGENT_CNI_CYCLES:-60} \
  go test -json -count=1 -timeout 20m -skip '^(TestKubectlTop|TestCSIStatefulSet|TestCSIAttachRequired|TestCSIMigrationAttach)$' $pkgs | _output/bin/gotestfilter || status=1
# The concurrent hearts of the agent also run under the race detector (the
# pods package drives its manager, workers and static source against a real
# containerd and PLEG in process).
# (The race detector needs cgo.)
CGO_ENABLED=1 go test -json -race -count=1 -timeout 10m ./pleg | _output/bin/gotestfilter || status=1
CGO_ENABLED=1 go test -json -race -count=1 -timeout 10m ./pods ./heartbeat | _output/bin/gotestfilter || status=1
# From here on the conformance specs run beside the remaining phases (fault
# suite, fuzzing, containerd 2.x, packages, kubeadm join: about 15 minutes
# warm, mostly waiting), on a cluster of their own, and are joined at the end.
if [ -z "${SKIP_CONFORMANCE:-}" ]; then
  beside "upstream node conformance (NodeLease, [NodeConformance], feature short form, userns on containerd 2.x; own cluster)" conformance_beside
fi
beside "kubectl top through metrics-server and the real CSI sidecars (e2e TestKubectlTop, TestCSIStatefulSet, TestCSIAttachRequired, TestCSIMigrationAttach; shared cluster)" metrics_beside
# The fault suite (issue 15) stops the API server, etcd and containerd: it
# starts a cluster of its own and runs alone (docs/reliability.md).
# The fuzzer's instrumented build (every package of ./config and the
# standard library compiled again with coverage counters: cold about 6
# minutes of CPU, warm a cache hit) starts now, niced, beside the fault
# suite, which mostly waits; the fuzzing phase then finds it in the build
# cache. Cleanup stops it; if it failed, the fuzzing phase's own go test
# reports why.
(
  set -m
  (
    nice -n 10 go test -c -fuzz=FuzzDecode -o "$dir/config-fuzz.test" ./config >"$dir/fuzz-build.log" 2>&1 </dev/null
    echo $? >"$dir/fuzz-build.rc"
  ) &
  echo $! >"$dir/fuzz-build.pgid"
)
phase "fault suite (e2e/fault, on its own cluster)"
# The seed of the suite's random choices, printed so that a failure can be
# replayed (NODEAGENT_FAULT_SEED=<seed> make test, or go test ./e2e/fault).
export NODEAGENT_FAULT_SEED=${NODEAGENT_FAULT_SEED:-$(( $(date +%s%N) % 1000000000000 ))}
echo "fault suite seed: NODEAGENT_FAULT_SEED=$NODEAGENT_FAULT_SEED"
go test -json -count=1 -parallel 4 -timeout 25m ./e2e/fault | _output/bin/gotestfilter || status=1
# After the fault suite (whose CPU-starvation and latency tests want the
# machine to themselves) the guest boots beside the short phases below.
if [ -z "${SKIP_VM:-}" ]; then
  beside "cgroup v2 virtual machine (hack/test-vm.sh --short)" vm_beside
fi
# The multi-node short form (docs/multinode.md): its own 3-node cluster in
# network namespaces; mostly waiting (on pods, the node lifecycle
# controller's grace), so it runs beside the last phases too.
if [ -z "${SKIP_MULTINODE:-}" ]; then
  beside "multi-node cluster, short form (hack/test-multinode.sh)" hack/test-multinode.sh
fi

phase "config decoder fuzzing (10s)"
for _ in $(seq 1800); do [ -e "$dir/fuzz-build.rc" ] && break; sleep 1; done
go test ./config -run='^$' -fuzz=FuzzDecode -fuzztime=10s -fuzzminimizetime=200x || status=1

# --- current containerd (issue 5) -------------------------------------------
# The runtime adapter must work with Debian's containerd 1.6 (used above) and
# a current release: build that from the Go module proxy (cached outside the
# tree, see hack/build-containerd.sh) and run the real-containerd tests of
# runtime and pleg against it, one package at a time (pleg lowers the inotify
# watch limit for a moment). SKIP_CONTAINERD_CURRENT=1 leaves it out.
# Through gotestfilter as the go test phase: a real-containerd test that
# skips itself here (a shim or runc it cannot find next to the current
# containerd) fails the phase instead of passing it unrun.
if [ -z "${SKIP_CONTAINERD_CURRENT:-}" ]; then
  phase "runtime and pleg against a current containerd"
  if cbin=$(hack/build-containerd.sh | tail -n1); then
    NODEAGENT_CONTAINERD_BIN=$cbin/containerd go test -json -count=1 -p 1 -timeout 10m ./runtime ./pleg | _output/bin/gotestfilter || status=1
    # A pod whose container exits while containerd 2.x still starts it
    # (its task then left out of the task list): Debian's 1.6 lists such
    # a task as unknown, only 2.x shows the bug (docs/pods.md, about 7 s).
    NODEAGENT_CONTAINERD_BIN=$cbin/containerd go test -json -count=1 -timeout 5m -run '^TestEarlyExitBeforeStartReturns$' ./pods | _output/bin/gotestfilter || status=1
    # User namespaces need runc 1.2+ (idmapped mounts); Debian's is 1.1:
    # the test again with a current runc (hack/build-runc.sh), where the
    # pod's containers really run in a user namespace (about 5 s warm).
    if runc=$(hack/build-runc.sh | tail -n1); then
      NODEAGENT_CONTAINERD_BIN=$cbin/containerd NODEAGENT_RUNC_BIN=$runc \
        go test -json -count=1 -timeout 5m -run '^TestUserNamespaceAgainstContainerd$' ./runtime | _output/bin/gotestfilter || status=1
    else
      echo "building the current runc failed" >&2
      status=1
    fi
  else
    echo "building the current containerd failed" >&2
    status=1
  fi
fi
# ---------------------------------------------------------------------------
deb=
if [ -z "${SKIP_SYSTEMD:-}" ]; then
  phase "packages under systemd-nspawn"
  rootfs_wait
  deb=$dir/nodeagent.deb
  NODEAGENT_SAVE_DEB=$deb hack/test-systemd.sh || status=1
fi
# kubeadm join on a booted Debian with the package in kubelet's place,
# against the shared cluster (hack/test-join.sh, docs/joining.md), with the
# .deb the package phase built.
if [ -z "${SKIP_JOIN:-}" ]; then
  phase "kubeadm join with the package as kubelet (systemd-nspawn)"
  rootfs_wait
  if [ -n "$deb" ] && [ -f "$deb" ]; then
    NODEAGENT_TEST_DEB=$deb hack/test-join.sh || status=1
  else
    hack/test-join.sh || status=1
  fi
fi
join_beside
echo
echo "=== test: phase durations (budget: 60 min cold, 30 min warm; docs/testing.md)"
echo " wall    cpu of its processes"
printf '%s\n' "${durations[@]}"
echo "=== test: done in $(( $(date +%s) - t0 ))s, status $status"
exit $status
