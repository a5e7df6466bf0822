# lib.sh: boot and drive hack/vm's cgroup v2 guest (issue 27). Sourced by
# hack/test-vm.sh; reusable by later tests. The caller defines log and fail
# and sets WORK (a scratch directory) before vm_start.
#
# Networking, all of it on this machine and inside a network namespace the
# test creates (VM_NS), so that nothing of the host's network changes:
#   - the local control plane runs in VM_NS (its API server on the
#     namespace's 127.0.0.1);
#   - qemu runs in VM_NS with user-mode networking (slirp): the guest is
#     10.0.2.15 and reaches the namespace's loopback as 10.0.2.2, so the
#     guest's kubeconfig names https://10.0.2.2:<port> with tls-server-name
#     localhost (a name in the API server's certificate);
#   - the guest's node IP is its own 10.0.2.15 (the default route's
#     interface, as the agent picks it); VM_NS holds 10.0.2.15/32 on its
#     loopback and slirp forwards 10.0.2.15:10250 there to the guest's
#     10250, so the API server reaches the node API (logs, exec, metrics) at
#     the Node's InternalIP and daemonEndpoints port exactly as on a real
#     node. The namespace's local route to 10.0.2.15 has source 127.0.0.1:
#     slirp passes a forwarded connection's source address on to the guest
#     (only a loopback one becomes 10.0.2.2), and with the kernel's default
#     source for that route, 10.0.2.15 itself, the guest would answer its
#     own address and the connection would hang (the API server's "TLS
#     handshake timeout").
# The guest's side of the command channel is guest/usr/local/sbin/na-vm-runner;
# the 9p share VM_SHARE is the guest's /host.

VM_NS=
VM_QEMU_PID=
VM_SHARE=
VM_BOOT_SECONDS=

# vm_netns creates the network namespace (loopback up, 10.0.2.15/32 on it,
# reached from 127.0.0.1).
vm_netns() {
	VM_NS=navm-$$
	ip netns add "$VM_NS" || fail "ip netns add $VM_NS"
	ip -n "$VM_NS" link set lo up
	ip -n "$VM_NS" addr add 10.0.2.15/32 dev lo
	ip -n "$VM_NS" route replace table local local 10.0.2.15 dev lo proto kernel scope host src 127.0.0.1 ||
		fail "cannot set the source of $VM_NS's route to 10.0.2.15"
}

# ns runs a command in the test's network namespace.
ns() { ip netns exec "$VM_NS" "$@"; }

# vm_start IMAGE_DIR boots the guest in the background: -snapshot on the
# cached image, the share on 9p, the serial console to $WORK/console.log.
vm_start() {
	local img=$1
	VM_SHARE=$WORK/share
	mkdir -p "$VM_SHARE/cmd"
	command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 is not installed (hack/ensure-deps.sh installs qemu-system-x86)"
	# TCG: there is no KVM here. 2 vCPUs (the agent's cgroup math sees a
	# multi-CPU node), 2 GiB.
	# (ip netns exec directly, not the ns function: a function in the
	# background is a subshell, whose pid is not qemu's; -pidfile as well)
	ip netns exec "$VM_NS" qemu-system-x86_64 -accel tcg,thread=multi -smp 2 -m 2G -nodefaults -no-user-config \
		-display none -serial "file:$WORK/console.log" -pidfile "$WORK/qemu.pid" \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw rootfstype=ext4 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0 quiet loglevel=4 mitigations=off" \
		-drive "file=$img/root.img,format=raw,if=virtio,snapshot=on,cache=unsafe" \
		-netdev "user,id=n0,net=10.0.2.0/24,hostfwd=tcp:10.0.2.15:10250-:10250" -device virtio-net-pci,netdev=n0 \
		-virtfs "local,path=$VM_SHARE,mount_tag=host,security_model=none,id=host" \
		-device virtio-rng-pci \
		</dev/null >"$WORK/qemu.log" 2>&1 &
	VM_QEMU_PID=$!
	VM_T0=$SECONDS
}

# vm_wait_ready TIMEOUT: waits for the guest's command runner.
vm_wait_ready() {
	local deadline=$((SECONDS + $1))
	until [[ -s $VM_SHARE/ready ]]; do
		if ! kill -0 "$VM_QEMU_PID" 2>/dev/null; then
			cat "$WORK/qemu.log" >&2
			VM_QEMU_PID=
			fail "qemu exited before the guest booted (qemu's output above; console in $WORK/console.log)"
		fi
		((SECONDS < deadline)) || fail "the guest did not boot in $1s (serial console saved)"
		sleep 0.5
	done
	VM_BOOT_SECONDS=$((SECONDS - VM_T0))
	log "guest up in ${VM_BOOT_SECONDS}s (runner started at guest uptime $(cat "$VM_SHARE/ready")s)"
}

# g [-t TIMEOUT] SCRIPT: runs SCRIPT with bash in the guest as root, prints
# its output, returns its exit status. Default timeout 120s.
g() {
	local timeout=120
	if [[ $1 == -t ]]; then timeout=$2; shift 2; fi
	# A name unique per call without a counter: g often runs inside $(...),
	# where a counter's increment would be lost to the subshell and the
	# next call would read the previous one's output.
	local n=${EPOCHREALTIME/./}-$BASHPID
	printf '%s\n' "$*" >"$VM_SHARE/cmd/$n.sh.tmp"
	mv "$VM_SHARE/cmd/$n.sh.tmp" "$VM_SHARE/cmd/$n.sh"
	local deadline=$((SECONDS + timeout))
	until [[ -e $VM_SHARE/cmd/$n.rc ]]; do
		if ((SECONDS >= deadline)); then
			echo "g: timed out after ${timeout}s: $*" >&2
			return 124
		fi
		kill -0 "$VM_QEMU_PID" 2>/dev/null || { echo "g: qemu is gone" >&2; return 125; }
		sleep 0.1
	done
	cat "$VM_SHARE/cmd/$n.out"
	return "$(cat "$VM_SHARE/cmd/$n.rc")"
}

# vm_save_logs DIR: the guest's journal (if the guest still answers) next to
# the serial console.
vm_save_logs() {
	local dir=$1
	mkdir -p "$dir"
	cp "$WORK/console.log" "$dir/console.log" 2>/dev/null
	if [[ -n $VM_QEMU_PID ]] && kill -0 "$VM_QEMU_PID" 2>/dev/null && [[ -s $VM_SHARE/ready ]]; then
		g -t 60 'journalctl -b --no-pager -o short-monotonic' >"$dir/journal.txt" 2>&1
	fi
}

# vm_stop kills qemu (the disk is a snapshot: nothing to shut down cleanly)
# and removes the network namespace.
vm_stop() {
	local p
	# qemu's own pid, should it differ from the one started
	p=$(cat "$WORK/qemu.pid" 2>/dev/null) && [[ -n $p && $p != "$VM_QEMU_PID" ]] && kill -KILL "$p" 2>/dev/null
	if [[ -n $VM_QEMU_PID ]]; then
		kill -TERM "$VM_QEMU_PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$VM_QEMU_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$VM_QEMU_PID" 2>/dev/null
		wait "$VM_QEMU_PID" 2>/dev/null
		VM_QEMU_PID=
	fi
}

vm_netns_delete() {
	[[ -n $VM_NS ]] || return 0
	ip netns delete "$VM_NS"
	VM_NS=
}

# vm_pod NAME COMMAND [OPTION...]: prints the YAML of a pod on the guest's
# node ($NODE, or nodeagent-vm) for the checks to apply: host network (the
# guest has no CNI for the short form), every taint tolerated, one container
# "c" of the test busybox image running `sh -c COMMAND` (no '"' or '\' in
# it: it is written as a YAML double-quoted string). Options:
#   restart=Never        the pod's restartPolicy (default Always)
#   grace=SECONDS        terminationGracePeriodSeconds
#   namespace=NS         metadata.namespace (default: kubectl's -n)
#   requests=FLOW        the container's requests, a YAML flow map
#   limits=FLOW          its limits, e.g. "{cpu: 250m, memory: 64Mi}"
#   sep=1                ends with a document separator, for a stream of pods
vm_pod() {
	local name=$1 cmd=$2 o restart= grace= namespace= requests= limits= sep=
	shift 2
	for o; do
		case $o in
		restart=*) restart=${o#*=} ;;
		grace=*) grace=${o#*=} ;;
		namespace=*) namespace=${o#*=} ;;
		requests=*) requests=${o#*=} ;;
		limits=*) limits=${o#*=} ;;
		sep=*) sep=${o#*=} ;;
		*) fail "vm_pod $name: unknown option $o" ;;
		esac
	done
	[[ $cmd != *[\"\\]* ]] || fail "vm_pod $name: the command has a '\"' or '\\': $cmd"
	printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s%s}\nspec:\n' "$name" "${namespace:+, namespace: $namespace}"
	printf '  nodeName: %s\n  hostNetwork: true\n' "${NODE:-nodeagent-vm}"
	[[ -z $restart ]] || printf '  restartPolicy: %s\n' "$restart"
	[[ -z $grace ]] || printf '  terminationGracePeriodSeconds: %s\n' "$grace"
	printf '  tolerations: [{operator: Exists}]\n  containers:\n  - name: c\n'
	printf '    image: docker.io/nodeagent/busybox:test\n    imagePullPolicy: Never\n'
	printf '    command: [sh, -c, "%s"]\n' "$cmd"
	if [[ -n $requests || -n $limits ]]; then
		printf '    resources:\n'
		[[ -z $requests ]] || printf '      requests: %s\n' "$requests"
		[[ -z $limits ]] || printf '      limits: %s\n' "$limits"
	fi
	[[ -z $sep ]] || printf -- '---\n'
}
