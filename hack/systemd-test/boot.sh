# boot.sh: boots the Debian root in $WORK/root under systemd-nspawn as
# machine $MACHINE with the extra arguments in the array binds, and waits
# until its systemd has finished booting. Sourced by hack/test-systemd.sh
# and hack/test-join.sh, which provide log, c (a command in the container)
# and the function named by NSPAWN_FAIL (default fail) for what stops the
# boot. Sets NSPAWN_PID (the nspawn process), LEADER (the container's PID 1)
# and state (is-system-running: running or degraded).
nspawn_boot() {
	local die=${NSPAWN_FAIL:-fail} deadline
	# --register=no --keep-unit: this host's PID 1 may not be systemd (no
	# machined, no system bus); the container needs neither.
	systemd-nspawn --quiet --boot --register=no --keep-unit --machine="$MACHINE" \
		--directory="$WORK/root" "${binds[@]}" >"$WORK/console.log" 2>&1 </dev/null &
	NSPAWN_PID=$!
	deadline=$((SECONDS + 30))
	while [[ -z $LEADER ]]; do
		LEADER=$(pgrep -P "$NSPAWN_PID" -x systemd || true)
		if ! kill -0 "$NSPAWN_PID" 2>/dev/null; then
			NSPAWN_PID=
			tail -n 20 "$WORK/console.log" >&2
			"$die" "systemd-nspawn cannot boot a container on this machine (console log above)"
		fi
		((SECONDS < deadline)) || { tail -n 20 "$WORK/console.log" >&2; "$die" "systemd-nspawn did not start systemd within 30s"; }
		[[ -n $LEADER ]] || sleep 0.1
	done
	# PID 1 exists before its manager bus does: retry until systemctl gets an answer.
	deadline=$((SECONDS + 90))
	until state=$(c timeout 10 systemctl is-system-running --wait 2>/dev/null) || [[ $state == degraded ]]; do
		if ((SECONDS >= deadline)); then
			c systemctl list-jobs --no-pager >&2
			c systemctl --failed --no-pager >&2
			fail "container systemd did not finish booting in 90s: '$state'"
		fi
		sleep 0.2
	done
}
