# shutdown.sh: graceful node shutdown under a real systemd and logind
# (issue 15: "`systemctl poweroff` with running pods"). Sourced by
# hack/test-systemd.sh as its last step, with its helpers (c, log, fail,
# step, expect_eq, wait_for) and variables (ROOT, WORK, LEADER, NSPAWN_PID,
# NODE, DEB, APICHECK, KUBECONFIG, NODEAGENT_CONTAINERD_ADDRESS): it powers
# the container off.
#
# The agent in the container runs pods on the host's containerd (the local
# cluster's, bound to /run/containerd/containerd.sock), so every host path
# the agent hands to containerd must mean the same file on the host: the
# agent's binaries (the shim runs the log writer), its rootDir and the
# pod's hostPath live under SHARED, which is a directory in the container
# and, on the host, a symlink with the same path into the container's root.
#
# Checks: logind's delay is raised to shutdownGracePeriod (20s, 5s for
# critical pods) by the agent's drop-in; `systemd-inhibit --list` shows the
# agent's delay lock; a pod whose preStop hook and SIGTERM handler (3s)
# write to a hostPath file runs; `systemctl poweroff`; seen from outside,
# the Node turns Ready=False "node is shutting down" and the pod Failed
# (Terminated, DisruptionTarget); the evidence file shows preStop, SIGTERM
# and the handler's end; the container powered off only after the handler
# ended, within the grace period plus systemd's own stop time.

step "graceful node shutdown: systemctl poweroff with a running pod"
SHUTDOWNCHECK=$ROOT/_output/bin/systemd-test-shutdowncheck
go build -o "$SHUTDOWNCHECK" ./hack/systemd-test/shutdowncheck
go build -o "$ROOT/_output/bin/importimage" ./hack/importimage
[[ -n ${NODEAGENT_CONTAINERD_ADDRESS:-} ]] || fail "graceful shutdown: no local containerd to run the pod on"
"$ROOT/_output/bin/importimage" --address "$NODEAGENT_CONTAINERD_ADDRESS" --namespace k8s.io >"$WORK/importimage.log" ||
	fail "importimage"
IMAGE=$(awk 'NR == 1 { print $1 }' "$WORK/importimage.log")

SHARED=$WORK/shared
c mkdir -p "$SHARED/bin" "$SHARED/state" "$SHARED/evidence"
ln -s "$WORK/root$SHARED" "$SHARED"
[[ -d $SHARED/evidence ]] || fail "cannot share $SHARED between the host and the container"

c dpkg -i "/pkgs/$DEB" </dev/null >"$WORK/dpkg-shutdown.log" 2>&1 || { cat "$WORK/dpkg-shutdown.log" >&2; fail "dpkg -i (shutdown)"; }
# postinst started the agent (the kubeconfig is there) with the packaged
# settings and the default node name: stop it until it is configured.
c systemctl stop nodeagent.service
c cp /usr/bin/nodeagent /usr/bin/nodeagent-container-logger "$SHARED/bin/"
# The container's cgroup tree is read-only (and not the host's, where the
# host's runc puts the containers): no kubepods hierarchy.
# The container's disk is the shared host's (see "configure and start" in
# test-systemd.sh): disk eviction at 1 %, or DiskPressure refuses the pod.
printf 'cniConfDir: ""\ncgroupsPerQOS: false\nenforceNodeAllocatable: [none]\nrootDir: %s/state\nshutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 5s\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: 1%%\n  imagefs.available: 1%%\n' "$SHARED" |
	c tee -a /etc/nodeagent/config.yaml >/dev/null
c sed -i "s|^NODEAGENT_EXTRA_ARGS=.*|NODEAGENT_EXTRA_ARGS=\"--hostname-override=$NODE\"|" /etc/default/nodeagent
printf '[Service]\nExecStart=\nExecStart=%s/bin/nodeagent --config=/etc/nodeagent/config.yaml --kubeconfig=/etc/nodeagent/kubeconfig $NODEAGENT_EXTRA_ARGS\n' "$SHARED" |
	c tee /etc/systemd/system/nodeagent.service.d/60-shutdown.conf >/dev/null
c systemctl daemon-reload
# hostNetwork pods get the node's /etc/hosts; debootstrap's root has none.
c sh -c 'test -e /etc/hosts || printf "127.0.0.1 localhost\n::1 localhost\n" >/etc/hosts'
expect_eq "logind's InhibitDelayMaxUSec before the agent" "$(c busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec)" "t 5000000"
c systemctl start nodeagent.service || fail "systemctl start nodeagent (shutdown)"
"$APICHECK" ready "$NODE" 60s

# The agent raised logind's delay and holds its lock.
wait_for 10 "logind's delay raised to 20s" bash -c \
	"[[ \$(nsenter -t $LEADER -m -u -i -n -p -- busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec) == 't 20000000' ]]"
c cat /etc/systemd/logind.conf.d/99-nodeagent.conf >&2 || fail "no logind drop-in from the agent"
log "ok: the agent raised logind's InhibitDelayMaxSec to shutdownGracePeriod (20s)"
c systemd-inhibit --list --no-pager >"$WORK/inhibit.log" 2>&1 || true
cat "$WORK/inhibit.log" >&2
grep -E '^ *nodeagent .*shutdown .*Kubelet needs time to handle node shutdown +delay' "$WORK/inhibit.log" >/dev/null ||
	fail "systemd-inhibit --list shows no shutdown delay lock of nodeagent"
log "ok: systemd-inhibit --list shows the agent's shutdown delay lock"

# A pod whose end leaves evidence.
"$SHUTDOWNCHECK" pod "$NODE" graceful "$SHARED/evidence" "$IMAGE" || fail "the pod did not start"
wait_for 10 "the pod's first log line" grep -q started "$SHARED/evidence/log"

# Watch from outside, follow the agent's journal, power off.
"$SHUTDOWNCHECK" watch "$NODE" graceful 60s >"$WORK/shutdown-watch.log" 2>&1 &
WATCH_PID=$!
# As a unit of the container's systemd, which stops it at the poweroff: a
# journalctl started with nsenter is outside its units, ignored the final
# SIGTERM, and held the poweroff for 90s.
c systemd-run --quiet --unit=na-journal-follow --property=StandardOutput="file:$SHARED/shutdown-journal.log" \
	journalctl -u nodeagent -f -n 0 -o short-precise || fail "follow the agent's journal"
sleep 0.5
t0=$(date +%s.%N)
c systemctl poweroff || fail "systemctl poweroff"
deadline=$((SECONDS + 90))
while kill -0 "$NSPAWN_PID" 2>/dev/null; do
	if ((SECONDS >= deadline)); then
		cat "$WORK/shutdown-watch.log" "$SHARED/shutdown-journal.log" >&2
		tail -n 40 "$WORK/console.log" >&2
		fail "the container did not power off within 90s"
	fi
	sleep 0.1
done
t1=$(date +%s.%N)
wait "$NSPAWN_PID" 2>/dev/null || true
NSPAWN_PID= LEADER=
watch_rc=0
wait "$WATCH_PID" || watch_rc=$?
log "--- the Node and the pod seen from outside (seconds since the watch began)"
cat "$WORK/shutdown-watch.log" >&2
log "--- the agent's journal during the shutdown"
grep -E 'shutting down|stopping pod|pods stopped|inhibitor|shutdown handled|Stopping container' "$SHARED/shutdown-journal.log" >&2 || true
log "--- the pod's evidence file"
cat "$SHARED/evidence/log" >&2
((watch_rc == 0)) || fail "the Node and the pod did not both show the shutdown"
grep -q 'node Ready=False reason=KubeletNotReady message="node is shutting down"' "$WORK/shutdown-watch.log" ||
	fail "the Node did not report kubelet's shutdown reason"
grep -q 'pod phase=Failed reason=Terminated message="Pod was terminated in response to imminent node shutdown." DisruptionTarget=True/TerminationByKubelet' "$WORK/shutdown-watch.log" ||
	fail "the pod's status is not kubelet's node-shutdown status"
log "ok: the Node said \"node is shutting down\"; the pod ended Failed/Terminated with DisruptionTarget"
for what in prestop sigterm exit; do
	grep -q "^$what " "$SHARED/evidence/log" || fail "the pod's evidence has no '$what'"
done
at() { awk -v w="$1" '$1 == w { print $2; exit }' "$SHARED/evidence/log"; }
read -r poweroff sigterm handler <<<"$(awk -v t0="$t0" -v t1="$t1" -v s="$(at sigterm)" -v e="$(at exit)" \
	'BEGIN { printf "%.1f %.0f %.0f\n", t1 - t0, s - t0, e - s }')"
log "poweroff took ${poweroff}s; SIGTERM ${sigterm}s after it (whole seconds); the handler ran ${handler}s (its 3s)"
# The handler's end is in the file, so the poweroff waited for it; evidence
# times are whole seconds.
(($(at exit) <= ${t1%.*} + 1)) || fail "the pod's handler ended after the container powered off"
awk -v p="$poweroff" 'BEGIN { exit !(p >= 3 && p <= 30) }' ||
	fail "poweroff took ${poweroff}s: want at least the handler's 3s and at most shutdownGracePeriod (20s) + 10s"
log "ok: poweroff waited for the pod's SIGTERM handler and finished in ${poweroff}s (shutdownGracePeriod 20s)"
"$SHUTDOWNCHECK" delete graceful || true
