# long.sh: hack/test-vm.sh's long form (make test-vm; issue 27), sourced by
# it. vm_long_build runs with the build step, before the guest boots;
# vm_long_conformance and vm_long_hold run after the short form's checks,
# with test-vm.sh's g, k, ns, log, step, fail, expect_eq and its guest, node
# and control plane (docs/vm.md, "The long form").
#
# Environment:
#   NODEAGENT_VM_CONFORMANCE_PROCS    ginkgo processes (3)
#   NODEAGENT_VM_CONFORMANCE_TIMEOUT  the suite's timeout (150m: TCG)
#   NODEAGENT_VM_CONFORMANCE_FOCUS    a --focus of its own instead of the
#                                     node set (judged --partial); "skip"
#                                     leaves the conformance part out (for
#                                     developing the hold; says so, fails
#                                     nothing)
#   NODEAGENT_VM_HOLD_PODS            pods held, at most (100)
#   NODEAGENT_VM_HOLD_SECONDS         the hold's length (600)
#   NODEAGENT_VM_HOLD_MIN_AVAILABLE   MiB of MemAvailable the guest keeps:
#                                     no more pods once below it (256)

# vm_long_build: the upstream suite, the ginkgo CLI, the ratchet, and the
# e2e images as archives in the share; the host's CNI plugins into it.
vm_long_build() {
	local out
	out=$(hack/conformance.sh --build-only 2>"$WORK/conformance-build.log" | tail -n 3) && [[ -n $out ]] ||
		{ tail -n 30 "$WORK/conformance-build.log" >&2; fail "hack/conformance.sh --build-only"; }
	mapfile -t out <<<"$out"
	SUITE=${out[0]} GINKGO=${out[1]} E2E_IMAGES=${out[2]}
	[[ -x $SUITE && -x $GINKGO && -s $E2E_IMAGES/agnhost ]] || fail "hack/conformance.sh --build-only printed '${out[*]}'"
	go build -o "$ROOT/_output/bin/ratchet" ./hack/conformance/ratchet
	"$WORK/testimage" --e2e "$E2E_IMAGES" "$WORK/share/e2e" >"$WORK/e2e-images.txt" || fail "writing the e2e images' archives"
	# The guest has no CNI plugins (its image is minimal): the host's
	# Debian ones (static Go programs) go to the guest's /usr/lib/cni.
	mkdir -p "$WORK/share/cni"
	for p in bridge host-local loopback; do
		cp "/usr/lib/cni/$p" "$WORK/share/cni/" || fail "no /usr/lib/cni/$p on the host (containernetworking-plugins)"
	done
}

# vm_long_known_failures FILE: the guest's list of specs known not to pass:
# the host node set's (hack/conformance/known-failures.txt) without the
# storage specs (no CSI driver in the guest) and the host kernel's group
# (the guest's kernel has the dummy link type), and the guest's own
# (hack/conformance/vm/known-failures.txt, each with its reason).
vm_long_known_failures() {
	awk '
		/^## / { skip = ($0 == "## This host'"'"'s kernel") }
		/^External Storage / { next }
		skip && !/^## / && !/^$/ { next }
		{ print }
	' hack/conformance/known-failures.txt
	echo
	cat hack/conformance/vm/known-failures.txt
}

vm_long_conformance() {
	if [[ ${NODEAGENT_VM_CONFORMANCE_FOCUS:-} == skip ]]; then
		log "NODEAGENT_VM_CONFORMANCE_FOCUS=skip: NodeConformance against the guest NOT RUN"
		return 0
	fi
	local cidr s src=0 args
	# Pod networking: a bridge over the node's pod CIDR, as
	# hack/conformance.sh gives its agent (no ipMasq and no portmap: the
	# guest has no iptables). cniConfDir is a restart field.
	cidr=$(k get node "$NODE" -o jsonpath='{.spec.podCIDR}')
	[[ -n $cidr ]] || fail "node $NODE has no spec.podCIDR (does the test's kube-controller-manager allocate node CIDRs?)"
	s=$SECONDS
	g -t 600 "$(
		cat <<EOF
set -e
swapoff -a
mkdir -p /usr/lib/cni
install -m 0755 /host/cni/* /usr/lib/cni/
mkdir -p /etc/cni/net.d
cat >/etc/cni/net.d/10-navm.conflist <<'NET'
{
  "cniVersion": "1.0.0",
  "name": "navm",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
NET
sed -i 's|^cniConfDir: ""\$|cniConfDir: /etc/cni/net.d|' /etc/nodeagent/config.yaml
grep -qx 'cniConfDir: /etc/cni/net.d' /etc/nodeagent/config.yaml
# The e2e images are imported (nothing can be pulled): never collect them.
echo 'imageGCHighThresholdPercent: 100' >>/etc/nodeagent/config.yaml
for f in /host/e2e/*.tar; do /usr/local/bin/ctr --namespace k8s.io images import "\$f" >/dev/null; done
systemctl restart nodeagent.service
systemctl is-active nodeagent.service
EOF
	)" >"$WORK/conformance-setup.txt" || { cat "$WORK/conformance-setup.txt" >&2; fail "setting up the guest for the conformance specs"; }
	log "ok: CNI bridge over $cidr, $(wc -l <"$WORK/e2e-images.txt") e2e images imported, agent restarted ($((SECONDS - s))s)"
	k delete namespace vm --wait=false >/dev/null
	k wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null || fail "node $NODE not Ready after the restart with pod networking"
	# The short form's pods gone before the specs start: their requests
	# (1,950 of the guest's 2,000 millicores) are still the node's while
	# they terminate, and the first specs' pods were refused OutOfcpu, as
	# kubelet refuses them (run of 2026-11-29 05:51).
	k wait --for=delete namespace/vm --timeout=180s >/dev/null 2>&1 || ! k get namespace vm >/dev/null 2>&1 ||
		fail "the short form's namespace vm is still there 180s after its deletion"

	local procs=${NODEAGENT_VM_CONFORMANCE_PROCS:-3} timeout=${NODEAGENT_VM_CONFORMANCE_TIMEOUT:-150m}
	args=(--kubeconfig "$KUBECONFIG" --nodeagent.node "$NODE" --nodeagent.results "$WORK/results.jsonl")
	local gargs=() rargs=()
	if [[ -n ${NODEAGENT_VM_CONFORMANCE_FOCUS:-} ]]; then
		gargs=(--focus="$NODEAGENT_VM_CONFORMANCE_FOCUS")
		rargs=(--partial)
		log "NODEAGENT_VM_CONFORMANCE_FOCUS: only '$NODEAGENT_VM_CONFORMANCE_FOCUS', judged --partial"
	else
		args+=(--nodeagent.set=node)
	fi
	log "the node set's specs (without storage) against $NODE: $procs processes, timeout $timeout (output: $WORK/conformance.log)"
	s=$SECONDS
	ns "$GINKGO" run --procs="$procs" --no-color --timeout="$timeout" --poll-progress-after=10m --flake-attempts=2 "${gargs[@]}" \
		"$SUITE" -- "${args[@]}" >"$WORK/conformance.log" 2>&1 || src=$?
	CONFORMANCE_SECONDS=$((SECONDS - s))
	log "specs ran in ${CONFORMANCE_SECONDS}s, suite exit status $src"
	mkdir -p "$ROOT/_output/vm-conformance"
	cp "$WORK/conformance.log" "$ROOT/_output/vm-conformance/"
	[[ -s $WORK/results.jsonl ]] || { tail -n 50 "$WORK/conformance.log" >&2; fail "the suite wrote no results (exit status $src)"; }
	cp "$WORK/results.jsonl" "$ROOT/_output/vm-conformance/"
	vm_long_known_failures >"$WORK/known-failures.txt"
	grep -v '^External Storage ' hack/conformance/expected-specs.txt >"$WORK/expected-specs.txt"
	cp "$WORK/known-failures.txt" "$WORK/expected-specs.txt" "$ROOT/_output/vm-conformance/"
	"$ROOT/_output/bin/ratchet" --results "$WORK/results.jsonl" --known "$WORK/known-failures.txt" \
		--expected "$WORK/expected-specs.txt" --timing hack/conformance/timing-sensitive.txt --suite-exit "$src" "${rargs[@]}" ||
		fail "NodeConformance against $NODE: the ratchet (above; results and lists in _output/vm-conformance/)"
	log "ok: NodeConformance against $NODE as the ratchet judges it ($CONFORMANCE_SECONDS s)"
}

# hold_unit_stats: one line from the guest: MemAvailable (MiB), the agent
# unit's memory.current, memory.events high, memory.pressure some avg10 and
# avg60, cpu.stat usage_usec.
hold_unit_stats() {
	local unit=/sys/fs/cgroup/system.slice/nodeagent.service
	g -t 60 "echo \$(awk '/^MemAvailable:/ { print int(\$2 / 1024) }' /proc/meminfo) \$(cat $unit/memory.current) \$(awk '\$1 == \"high\" { print \$2 }' $unit/memory.events) \$(awk '/^some/ { sub(\"avg10=\", \"\", \$2); sub(\"avg60=\", \"\", \$3); print \$2, \$3 }' $unit/memory.pressure) \$(awk '\$1 == \"usage_usec\" { print \$2 }' $unit/cpu.stat)"
}

# hold_diagnose: what a stalled batch leaves in $HOLD_OUT: the pods, the
# events of those not Ready, the agent's and containerd's journals, the
# agent unit's memory files, containerd's tasks, the guest's memory.
hold_diagnose() {
	k get -n hold pods -o wide >"$HOLD_OUT/pods.txt" 2>&1
	k get -n hold events --sort-by=.lastTimestamp >"$HOLD_OUT/events.txt" 2>&1
	k get node "$NODE" -o yaml >"$HOLD_OUT/node.yaml" 2>&1
	k get --raw "/api/v1/nodes/$NODE/proxy/metrics" >"$HOLD_OUT/metrics.txt" 2>&1
	local p
	for p in $(k get -n hold pods -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | awk '$2 != "True" { print $1 }'); do
		k describe -n hold pod "$p"
	done >"$HOLD_OUT/not-ready.txt" 2>&1
	g -t 300 "$(
		cat <<'EOF'
u=/sys/fs/cgroup/system.slice/nodeagent.service
for f in memory.current memory.high memory.max memory.events memory.pressure memory.stat cpu.stat cpu.pressure; do echo "== $f"; cat $u/$f; done
echo "== /proc/meminfo"; cat /proc/meminfo
echo "== /proc/pressure/memory"; cat /proc/pressure/memory
echo "== /proc/pressure/cpu"; cat /proc/pressure/cpu
echo "== ctr tasks, containers"; /usr/local/bin/ctr -n k8s.io task ls | wc -l; /usr/local/bin/ctr -n k8s.io containers ls | wc -l
echo "== top"; top -b -n 1 | head -n 40
EOF
	)" >"$HOLD_OUT/guest-state.txt" 2>&1
	g -t 300 'journalctl -u nodeagent --no-pager -o short-monotonic' >"$HOLD_OUT/agent-journal.txt" 2>&1
	g -t 300 'journalctl -u containerd --no-pager -o short-monotonic | tail -n 3000' >"$HOLD_OUT/containerd-journal.txt" 2>&1
}

# hold_pod NAME: a pause-like sleeper with small requests.
hold_pod() {
	vm_pod "$1" "exec sleep 86400" namespace=hold grace=1 requests="{cpu: 1m, memory: 4Mi}" sep=1
}

vm_long_hold() {
	local want=${NODEAGENT_VM_HOLD_PODS:-100} secs=${NODEAGENT_VM_HOLD_SECONDS:-600} minavail=${NODEAGENT_VM_HOLD_MIN_AVAILABLE:-256}
	local unit=/sys/fs/cgroup/system.slice/nodeagent.service out n i avail
	# Nothing of the earlier checks left running on the node.
	k delete namespace vm --ignore-not-found --wait=false >/dev/null
	out=$(g -t 180 "$(
		cat <<'EOF'
set -e
# No swap for the hold (the short form's check 6 left a swap file on, and
# the conformance part may not have run): the agent's memory stays in RAM.
swapoff -a
mkdir -p /etc/systemd/system/nodeagent.service.d
printf '[Service]\nMemoryHigh=32M\n' >/etc/systemd/system/nodeagent.service.d/memory-high.conf
systemctl daemon-reload
systemctl restart nodeagent.service
systemctl show --property=MemoryHigh --value nodeagent.service
cat /sys/fs/cgroup/system.slice/nodeagent.service/memory.high
EOF
	)") || fail "the MemoryHigh=32M drop-in: $out"
	expect_eq "nodeagent.service's MemoryHigh and its memory.high" "$(echo $out)" "33554432 33554432"
	k wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null || fail "node $NODE not Ready after the restart under MemoryHigh=32M"
	k create namespace hold >/dev/null

	# As many pods as the guest holds, up to $want: batches of 10, until
	# MemAvailable falls below $minavail MiB.
	n=0
	local s=$SECONDS bs nready st
	HOLD_OUT=$ROOT/_output/vm-hold
	rm -rf "$HOLD_OUT" && mkdir -p "$HOLD_OUT"
	local batches=$HOLD_OUT/hold-batches.txt
	echo "# t_s pods_created pods_ready MemAvailable_MiB memory.current memory.high_events some_avg10 some_avg60 agent_cpu_usec" >"$batches"
	while ((n < want)); do
		local batch=$((want - n < 10 ? want - n : 10))
		for ((i = n; i < n + batch; i++)); do hold_pod "hold-$i"; done | k apply -f - >/dev/null || fail "creating the hold's pods"
		n=$((n + batch))
		# Each batch Ready within 600 s; every 30 s a line with the Ready
		# count and the agent's memory (so that a stalled batch says where
		# it stalled and what the agent's cgroup looked like meanwhile).
		bs=$SECONDS
		while :; do
			nready=$(k get -n hold pods -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c '^True$') || true
			st=$(hold_unit_stats) || st="error"
			echo "$((SECONDS - s)) $n $nready $st" >>"$batches"
			((nready >= n)) && break
			if ((SECONDS - bs >= 600)); then
				log "the hold's batch of $n: $nready Ready after 600s (agent: $st)"
				hold_diagnose
				fail "the hold's $n pods did not all become Ready in 600s (diagnostics in $HOLD_OUT)"
			fi
			sleep 30
		done
		avail=${st%% *}
		[[ $avail =~ ^[0-9]+$ ]] || fail "reading the guest's MemAvailable and the agent's memory: $st"
		log "$n pods Ready ($((SECONDS - s))s); guest MemAvailable ${avail} MiB; agent memory.current, high events, PSI some avg10 avg60, cpu usec: ${st#* }"
		if ((avail < minavail && n < want)); then
			log "the guest holds $n pods: MemAvailable ${avail} MiB is under ${minavail} MiB, no more"
			break
		fi
	done
	HOLD_PODS=$n

	# Every Lease update during the hold, from a watch (no renewal between
	# two polls can be missed), and a sample every 10 s: the node's Ready,
	# the agent's /healthz through the API server, the unit's memory PSI,
	# memory.current and memory.events' high count, the unit's restarts.
	local lease=$WORK/lease-renewals.txt samples=$WORK/hold-samples.txt
	# (ip netns exec execs kubectl: $! is kubectl's pid.)
	ip netns exec "$VM_NS" "$KUBECTL" get lease -n kube-node-lease "$NODE" --watch -o 'jsonpath={.spec.renewTime}{" "}{.spec.leaseDurationSeconds}{"\n"}' >"$lease" 2>"$WORK/lease-watch.err" &
	local watch=$!
	local pid0 t0=$SECONDS bad=0 ready hz
	# NRestarts (systemd's automatic restarts: the earlier checks' refused
	# start may have counted some) and MainPID before: unchanged after.
	pid0=$(g 'echo $(systemctl show --property=NRestarts --value nodeagent.service) $(systemctl show --property=MainPID --value nodeagent.service)')
	log "holding $HOLD_PODS pods for ${secs}s under MemoryHigh=32M (agent restarts and pid: $pid0; samples in $samples)"
	echo "# t_s ready healthz some_avg10 some_avg60 some_total_us memory.current memory.high_events nrestarts mainpid" >"$samples"
	while ((SECONDS - t0 < secs)); do
		ready=$(k get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || ready=error
		hz=$(k get --raw "/api/v1/nodes/$NODE/proxy/healthz" 2>/dev/null) || hz=error
		out=$(g "awk '/^some/ { sub(\"avg10=\", \"\", \$2); sub(\"avg60=\", \"\", \$3); sub(\"total=\", \"\", \$5); printf \"%s %s %s \", \$2, \$3, \$5 }' $unit/memory.pressure; echo \"\$(cat $unit/memory.current) \$(awk '\$1 == \"high\" { print \$2 }' $unit/memory.events) \$(systemctl show --property=NRestarts --value nodeagent.service) \$(systemctl show --property=MainPID --value nodeagent.service)\"") || out="error"
		echo "$((SECONDS - t0)) $ready ${hz:-empty} $out" >>"$samples"
		if [[ $ready != True || $hz != ok || $out == error ]]; then
			bad=$((bad + 1))
			log "sample at $((SECONDS - t0))s: Ready=$ready healthz=$hz guest=$out"
		fi
		sleep 10
	done
	kill "$watch" 2>/dev/null
	wait "$watch" 2>/dev/null || true # (killed: 143)
	HOLD_END=$(date -u +%s)
	cp "$samples" "$lease" "$HOLD_OUT/"

	# The figures.
	local psi
	psi=$(awk '!/^#/ && $6 != "" { n++; s += $5; if ($5 > m) m = $5; last = $5 } END { printf "mean %.2f max %.2f last %.2f (n=%d)", s / n, m, last, n }' "$samples")
	log "memory PSI some avg60 of nodeagent.service over the hold: $psi %"
	log "memory.current at the end: $(awk '!/^#/ { c = $7; h = $8 } END { printf "%d MiB, memory.events high %s", c / 1048576, h }' "$samples")"
	HOLD_PSI=$psi
	# Missed renewal windows: a gap between two renewTimes longer than one
	# renew interval (a quarter of leaseDurationSeconds, kubelet's
	# nodeLeaseRenewIntervalFraction) + 2 s (docs/benchmarks.md's rule),
	# and the time from the last renewal to the end.
	out=$(python3 - "$lease" "$HOLD_END" <<'PY'
import sys, datetime
end = int(sys.argv[2])
ts, dur = [], 40
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 2:
        continue
    t = datetime.datetime.fromisoformat(f[0].replace("Z", "+00:00")).timestamp()
    dur = int(f[1])
    if not ts or t != ts[-1]:
        ts.append(t)
limit = dur / 4 + 2
gaps = [b - a for a, b in zip(ts, ts[1:])] + ([end - ts[-1]] if ts else [])
missed = sum(1 for g in gaps if g > limit)
print(len(ts), missed, "%.1f" % max(gaps or [0]), "%.1f" % limit)
PY
	) || fail "reading the Lease's renewals"
	read -r nren missed maxgap limit <<<"$out"
	log "Lease renewals during the hold: $nren, longest gap ${maxgap}s, missed windows (gap > ${limit}s) $missed"
	HOLD_RENEWALS="$nren renewals, longest gap ${maxgap}s, $missed missed"
	((nren >= secs / 15)) || fail "only $nren Lease renewals seen in ${secs}s (the watch: $(cat "$WORK/lease-watch.err"))"

	k get --raw "/api/v1/nodes/$NODE/proxy/metrics" >"$WORK/hold-metrics.txt" || fail "the node's /metrics after the hold"
	grep -E '^nodeagent_pleg_(source_healthy|fallbacks_total)' "$WORK/hold-metrics.txt" >&2 || true
	local running
	running=$(k get -n hold pods --field-selector=status.phase=Running -o name | wc -l)
	local last
	last=$(awk '!/^#/ { r = $9; p = $10 } END { print r, p }' "$samples")
	((missed == 0)) || fail "the Lease missed $missed renewal windows under MemoryHigh=32M"
	((bad == 0)) || fail "$bad samples of the hold had the node not Ready, /healthz not ok or the guest not answering ($samples)"
	grep -qx 'nodeagent_pleg_source_healthy{source="cgroups"} 1' "$WORK/hold-metrics.txt" || fail "the PLEG's cgroups source is not healthy after the hold"
	! grep -q '^nodeagent_pleg_fallbacks_total{source="cgroups"} [1-9]' "$WORK/hold-metrics.txt" || fail "the PLEG fell back from the cgroups source during the hold"
	expect_eq "the agent's restarts and main pid at the end of the hold" "$last" "$pid0"
	expect_eq "the hold's pods still Running" "$running" "$HOLD_PODS"
	log "ok: MemoryHigh=32M hold: $HOLD_PODS pods, ${secs}s, $HOLD_RENEWALS, PLEG healthy, memory PSI some avg60 $HOLD_PSI %"
}
