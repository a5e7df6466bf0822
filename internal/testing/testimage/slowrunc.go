package testimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// SlowStartRunc writes, in a test's temporary directory, a runc that is
// the real one (RuncEnv's, else runc from PATH) except that "runc start"
// returns delay after the real one did: the container's process runs, and
// a short one exits, while containerd's Start is still waiting, and the
// shim, which holds the process's lock through runc start, does not answer
// state queries meanwhile (containerd 2.x gives up on one after 2s). It is
// what a slow host does (the cgroup v2 guest under emulation: docs/vm.md),
// made certain. It returns the wrapper's path: set RuncEnv to it before
// StartContainerd. The test is skipped when runc is not installed, as
// StartContainerd skips it.
func SlowStartRunc(t testing.TB, delay time.Duration) string {
	t.Helper()
	real := os.Getenv(RuncEnv)
	if real == "" {
		var err error
		if real, err = exec.LookPath("runc"); err != nil {
			t.Skip("runc not installed")
		}
	}
	script := fmt.Sprintf(`#!/bin/sh
# runc, with "start" returning %[2]s late (testimage.SlowStartRunc).
start=
for a in "$@"; do [ "$a" = start ] && start=1; done
%[1]q "$@"
rc=$?
[ -n "$start" ] && sleep %.3[3]f
exit $rc
`, real, delay, delay.Seconds())
	p := filepath.Join(t.TempDir(), "runc")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
