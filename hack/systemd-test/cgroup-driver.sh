# cgroup-driver.sh: `cgroupDriver: systemd` against the real systemd of
# hack/test-systemd.sh's container (issue 14). Sourced by test-systemd.sh,
# whose helpers (c, log, fail, expect_eq, wait_for) and variables (WORK,
# LEADER, DEB, NODE) it uses. Three entry points:
#
#   cgd_before_boot   just before systemd-nspawn starts: moves the test's shell
#                     into a fresh sub-cgroup "natest-<pid>" of its own cgroup
#                     in every cgroup v1 controller hierarchy, and adds the
#                     nspawn options the pod below needs to the binds array.
#   cgd_test          the step: real slices and scopes (see below).
#   cgd_cleanup       after the container is gone: removes those sub-cgroups.
#
# Why the sub-cgroups and the remount. On a cgroup v1 (or hybrid) host,
# systemd-nspawn mounts every controller hierarchy into the container
# read-only (its own cgroup namespace is the root of each mount; only
# name=systemd is writable), so the container's systemd cannot make a slice
# with a memory or cpu limit: runc's systemd manager fails with
# "mkdir /sys/fs/cgroup/cpuset/<x>.slice: read-only file system". The mounts
# are read-only only per mount point (MS_BIND|MS_REMOUNT|MS_RDONLY), so the
# host remounts them read-write in the container's mount namespace and has
# the container's systemd re-execute, which makes it probe the controllers
# again and realize its units in them. The container's cgroup namespace root
# in each hierarchy is the cgroup nspawn was started in; left in the caller's
# cgroup (often the hierarchy's root) the container's systemd would write its
# slices into the host's own hierarchy, hence the private sub-cgroups, which
# cgd_cleanup removes. nspawn's seccomp filter refuses the keyring system
# calls, which runc needs for a container's session keyring
# (--system-call-filter=@keyring allows them).
#
# The step, all inside the container with its own systemd:
#   1. cm's TestManagerSystemdSlices (go test -c ./cm, run in the container):
#      slices made over D-Bus with their limits in the cgroup files.
#   2. containerd (the host's binaries, as a transient unit with Delegate=yes,
#      like containerd.service) and the agent from the .deb with
#      cgroupDriver: systemd run a static Burstable pod: kubepods.slice /
#      kubepods-burstable.slice / kubepods-burstable-pod<uid>.slice /
#      cri-containerd-<id>.scope with the pod's and the container's limits,
#      the container's process in its scope; removing the manifest removes
#      the pod's slice.
#
# On a pure cgroup v2 host nothing is moved or remounted (nspawn gives the
# container a writable cgroup2 subtree there); the checks are the same.

CGD_SUB=
CGD_DIRS=()

# cgd_v1_controllers prints "HIERARCHY-DIR" for each cgroup v1 controller
# hierarchy this shell is in (name=systemd and the unified "0::" excluded):
# /sys/fs/cgroup/<controllers><path>.
cgd_v1_controllers() {
	local ctrl path
	while IFS=: read -r _ ctrl path; do
		[[ -n $ctrl && $ctrl != name=* ]] || continue
		[[ -d /sys/fs/cgroup/$ctrl ]] || continue
		echo "/sys/fs/cgroup/$ctrl${path%/}"
	done </proc/$$/cgroup
}

cgd_before_boot() {
	binds+=(--system-call-filter=@keyring)
	CGD_SUB=natest-$$
	local dir sub
	for dir in $(cgd_v1_controllers); do
		sub=$dir/$CGD_SUB
		mkdir "$sub" || fail "mkdir $sub"
		CGD_DIRS+=("$sub")
		if [[ -f $sub/cpuset.cpus ]]; then
			cat "$dir/cpuset.cpus" >"$sub/cpuset.cpus"
			cat "$dir/cpuset.mems" >"$sub/cpuset.mems"
		fi
		echo $$ >"$sub/cgroup.procs" || fail "move the test into $sub"
	done
	((${#CGD_DIRS[@]} == 0)) || log "test and container in sub-cgroup $CGD_SUB of ${#CGD_DIRS[@]} cgroup v1 hierarchies"
}

cgd_cleanup() {
	local sub deadline
	for sub in "${CGD_DIRS[@]}"; do
		echo $$ >"$(dirname "$sub")/cgroup.procs" 2>/dev/null
		# The container's processes die with its PID namespace; their
		# cgroups empty a moment later.
		deadline=$((SECONDS + 10))
		while [[ -d $sub ]]; do
			find "$sub" -depth -type d -exec rmdir {} + 2>/dev/null
			[[ -d $sub ]] || break
			((SECONDS < deadline)) || { log "could not remove $sub"; break; }
			sleep 0.2
		done
	done
	CGD_DIRS=()
}

# cin runs a command in the container like c, but also in its cgroup
# namespace, so that /proc/self/cgroup reads as it does for its services.
cin() {
	nsenter -t "$LEADER" -m -u -i -n -p -C -- env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}

# cgd_file CGROUP V1-CONTROLLER V1-FILE V2-FILE prints a cgroup file of the
# container's.
cgd_file() {
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		cin cat "/sys/fs/cgroup/$1/$4"
	else
		cin cat "/sys/fs/cgroup/$2/$1/$3"
	fi
}

# cgd_writable makes the container's cgroup v1 controller hierarchies
# writable (they are its private sub-cgroups, see above) and has its systemd
# re-execute to use them; nothing on a cgroup v2 host. Also used by
# hack/test-join.sh, whose agent runs with kubeadm's cgroupDriver: systemd.
cgd_writable() {
	local ctrl mnt
	if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
		# Never make the host's own hierarchy writable to the container.
		# (the host's view of /proc/<leader>/cgroup: every controller path
		# goes through the sub-cgroup)
		while IFS=: read -r _ ctrl mnt; do
			[[ -n $ctrl && $ctrl != name=* ]] || continue
			[[ $mnt == */$CGD_SUB || $mnt == */$CGD_SUB/* ]] || fail "the container's PID 1 is in $ctrl:$mnt, outside $CGD_SUB"
		done </proc/"$LEADER"/cgroup
		for mnt in $(cin awk '$3 == "cgroup" && $4 !~ /name=/ { print $2 }' /proc/self/mounts); do
			c mount -o remount,bind,rw "$mnt" || fail "remount $mnt read-write in the container"
		done
		c systemctl daemon-reexec
		wait_for 30 "the container's systemd after daemon-reexec" c systemctl is-system-running
		log "ok: the container's controller hierarchies are writable, systemd re-executed"
	fi
}

cgd_test() {
	cgd_writable

	# 1. The cm package's test, under this systemd.
	go test -c -o "$WORK/root/usr/local/bin/cm.test" ./cm
	cin /usr/local/bin/cm.test -test.run '^TestManagerSystemdSlices$' -test.v >"$WORK/cm-test.log" 2>&1 ||
		{ cat "$WORK/cm-test.log" >&2; fail "TestManagerSystemdSlices in the container"; }
	grep -q -- '^--- PASS: TestManagerSystemdSlices' "$WORK/cm-test.log" ||
		{ cat "$WORK/cm-test.log" >&2; fail "TestManagerSystemdSlices did not run (skipped?)"; }
	log "ok: TestManagerSystemdSlices passes against the container's systemd"

	# 2. A pod through containerd and the agent.
	local bin
	for bin in containerd containerd-shim-runc-v2 runc ctr; do
		cp "$(command -v "$bin")" "$WORK/root/usr/local/bin/" || fail "$bin not found on the host"
	done
	_output/bin/systemd-test-testimage "$WORK/root/busybox.tar" || fail "write the test image"
	cin mkdir -p /run/na-containerd
	printf '%s\n' 'version = 2' 'root = "/run/na-containerd/root"' 'state = "/run/na-containerd/state"' \
		'disabled_plugins = ["io.containerd.grpc.v1.cri"]' '[grpc]' '  address = "/run/na-containerd/containerd.sock"' \
		'[ttrpc]' '  address = "/run/na-containerd/containerd.sock.ttrpc"' | cin tee /run/na-containerd/config.toml >/dev/null
	cin systemd-run --quiet --unit=na-containerd --property=Type=notify --property=Delegate=yes --property=KillMode=process \
		/usr/local/bin/containerd --config /run/na-containerd/config.toml || fail "start containerd in the container"
	cin ctr --address /run/na-containerd/containerd.sock --namespace k8s.io images import /busybox.tar >/dev/null ||
		fail "import the test image"

	cin dpkg -i "/pkgs/$DEB" </dev/null >"$WORK/dpkg-cgroup.log" 2>&1 || { cat "$WORK/dpkg-cgroup.log" >&2; fail "dpkg -i"; }
	# postinst starts the agent (the kubeconfig is still there): stop it to
	# configure it.
	cin systemctl stop nodeagent.service
	# (the container shares the host's network: no fixed ports, which other
	# agents on the host may hold)
	# (kept, and put back at the end: the next step configures its own)
	cin cp /etc/nodeagent/config.yaml /etc/nodeagent/config.yaml.before-cgroup-driver
	printf '%s\n' 'cniConfDir: ""' 'cgroupDriver: systemd' 'podPidsLimit: 64' "hostnameOverride: $NODE" 'port: 0' 'healthzPort: 0' \
		'containerRuntimeEndpoint: unix:///run/na-containerd/containerd.sock' | cin tee -a /etc/nodeagent/config.yaml >/dev/null
	# hostNetwork: nspawn keeps CAP_NET_ADMIN from the container, so the
	# agent could not set up a pod network namespace; the node's hosts file
	# is what a hostNetwork pod gets, and debootstrap writes none.
	cin test -e /etc/hosts || printf '127.0.0.1 localhost\n' | cin tee /etc/hosts >/dev/null
	cin systemctl start nodeagent.service || fail "systemctl start nodeagent with cgroupDriver: systemd"
	local t=$SECONDS
	cin tee /etc/nodeagent/manifests/sd.yaml >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: cgroup-driver, namespace: default}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: docker.io/nodeagent/busybox:test
    imagePullPolicy: Never
    command: [sh, -c, "sleep 3600"]
    resources:
      requests: {cpu: 100m, memory: 16Mi}
      limits: {cpu: 200m, memory: 32Mi}
EOF
	wait_for 60 "the static pod's container to run in a systemd scope" \
		cin sh -c 'systemctl list-units --plain --no-legend --state=running "cri-containerd-*.scope" | grep -q .'
	log "static pod running after $((SECONDS - t))s"
	local scope slice cg pid
	scope=$(cin systemctl list-units --plain --no-legend --state=running 'cri-containerd-*.scope' | awk '{print $1; exit}')
	slice=$(cin systemctl show -P Slice "$scope")
	[[ $slice == kubepods-burstable-pod*.slice ]] || fail "$scope is in slice '$slice', want kubepods-burstable-pod<uid>.slice"
	cg=$(cin systemctl show -P ControlGroup "$scope")
	expect_eq "container scope's cgroup" "$cg" "/kubepods.slice/kubepods-burstable.slice/$slice/$scope"
	expect_eq "pod slice memory limit (32Mi)" "$(cgd_file "${cg%/*}" memory memory.limit_in_bytes memory.max)" 33554432
	expect_eq "pod slice cpu quota (200m)" "$(cgd_file "${cg%/*}" cpu cpu.cfs_quota_us cpu.max | cut -d' ' -f1)" 20000
	expect_eq "pod slice pids limit (podPidsLimit)" "$(cgd_file "${cg%/*}" pids pids.max pids.max)" 64
	expect_eq "container scope memory limit" "$(cgd_file "$cg" memory memory.limit_in_bytes memory.max)" 33554432
	expect_eq "container scope cpu quota" "$(cgd_file "$cg" cpu cpu.cfs_quota_us cpu.max | cut -d' ' -f1)" 20000
	pid=$(cgd_file "$cg" pids cgroup.procs cgroup.procs | head -n1)
	[[ -n $pid ]] || fail "no process in $cg"
	cin grep -q "$scope" "/proc/$pid/cgroup" || fail "process $pid is not in $scope"
	log "ok: container process $pid runs in $scope"
	# Evidence for docs/pods.md: on cgroup v1, systemd may have moved the
	# process from the scope's devices cgroup into the pod slice's.
	log "container process $pid: $(cin grep devices /proc/"$pid"/cgroup || echo 'no devices hierarchy')"

	# The container ignores SIGTERM (sleep as PID 1): it stops by SIGKILL
	# after its 2s grace period, which must reach it.
	t=$SECONDS
	cin rm /etc/nodeagent/manifests/sd.yaml
	wait_for 20 "the pod's container to be killed after its grace period" cin sh -c "! test -e /proc/$pid"
	wait_for 20 "the pod's slice to go away" cin sh -c "! systemctl is-active --quiet $slice"
	log "pod stopped and its slice removed $((SECONDS - t))s after its manifest was"
	! cgd_file "${cg%/*}" pids cgroup.procs cgroup.procs >/dev/null 2>&1 ||
		fail "$slice's cgroup is still there after the pod was removed"
	log "ok: removing the static pod removed $slice"
	# The PLEG watched the container's scope (in the unified hierarchy,
	# where systemd puts it on a hybrid host) without falling back.
	cin journalctl -u nodeagent --no-pager -o cat >"$WORK/journal-cgroup-driver"
	! grep -E 'PLEG event source failed|cannot watch pod cgroup parent' "$WORK/journal-cgroup-driver" >&2 ||
		fail "the PLEG's cgroup event source failed under the systemd driver"
	log "ok: the PLEG's cgroup event source did not fail"
	cin systemctl stop nodeagent.service na-containerd.service
	cin mv /etc/nodeagent/config.yaml.before-cgroup-driver /etc/nodeagent/config.yaml
}
