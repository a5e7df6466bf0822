package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// kubeletKernelTunables are kubelet 1.34's (setupKernelTunables), by
// their /proc/sys paths.
var kubeletKernelTunables = map[string]int{
	"vm/overcommit_memory":      1,
	"vm/panic_on_oom":           0,
	"kernel/panic":              10,
	"kernel/panic_on_oops":      1,
	"kernel/keys/root_maxkeys":  1000000,
	"kernel/keys/root_maxbytes": 25000000,
}

// hostKernelTunables reads the host's values of kubeletKernelTunables.
func hostKernelTunables(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name := range kubeletKernelTunables {
		b, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	return out
}

// waitExit waits (30s at most) for the agent to exit by itself and
// returns its exit code.
func (a *agent) waitExit() int {
	a.t.Helper()
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		a.t.Fatalf("the agent did not exit; log:\n%s", a.out)
	}
	return a.cmd.ProcessState.ExitCode()
}

// The kubelet fields CIS-hardened nodes set, on a real agent:
// protectKernelDefaults only reads the host's kernel tunables (it starts
// where they hold kubelet's values, and stops with kubelet's error naming
// each one that does not; they are never written), maxOpenFiles and
// oomScoreAdj are the agent process's own (/proc/<pid>/limits,
// /proc/<pid>/oom_score_adj), and podsPerCore caps the Node's pods
// capacity at podsPerCore × the host's online CPUs. The limit is lowered
// and the score raised: lowering a score or raising a hard limit needs
// CAP_SYS_RESOURCE, which test sandboxes may lack.
func TestHardenedKubeletFields(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx := context.Background()
	before := hostKernelTunables(t)
	a := newAgent(t, env, agentOpts{noRuntime: true, config: "protectKernelDefaults: true\nmaxOpenFiles: 4096\noomScoreAdj: 100\npodsPerCore: 1\n"})
	a.start()
	var differ []string
	for name, want := range kubeletKernelTunables {
		if before[name] != want {
			differ = append(differ, fmt.Sprintf("invalid kernel flag: %s, expected value: %d, actual value: %d", name, want, before[name]))
		}
	}
	defer func() {
		if after := hostKernelTunables(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("kernel tunables changed: %v, were %v", after, before)
		}
	}()
	if len(differ) > 0 {
		// This host does not hold kubelet's values: the start fails.
		t.Logf("host tunables %v differ from kubelet's", before)
		if code := a.waitExit(); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		for _, d := range differ {
			if !strings.Contains(a.out.String(), d) {
				t.Errorf("log lacks %q:\n%s", d, a.out)
			}
		}
		return
	}
	pid := a.cmd.Process.Pid
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus := 0
	for _, r := range strings.Split(strings.TrimSpace(string(online)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		l, _ := strconv.Atoi(lo)
		h := l
		if found {
			h, _ = strconv.Atoi(hi)
		}
		cpus += h - l + 1
	}
	want := int64(min(cpus, 110))
	n := a.waitNode(ctx, time.Minute, fmt.Sprintf("pods capacity %d", want), func(n *corev1.Node) bool {
		q := n.Status.Capacity[corev1.ResourcePods]
		return q.Value() == want
	})
	if q := n.Status.Allocatable[corev1.ResourcePods]; q.Value() != want {
		t.Errorf("allocatable pods %s, want %d", q.String(), want)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			line = strings.Join(strings.Fields(l), " ")
		}
	}
	if line != "Max open files 4096 4096 files" {
		t.Errorf("agent's limit: %q, want 4096 soft and hard", line)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid)); err != nil || strings.TrimSpace(string(b)) != "100" {
		t.Errorf("agent's oom_score_adj %q (%v), want 100", b, err)
	}
	if code, _ := a.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// failCgroupV1: true stops the agent on a cgroup v1 host with kubelet's
// error, before it registers; on cgroup v2 it starts.
func TestFailCgroupV1(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	a := newAgent(t, env, agentOpts{noRuntime: true, config: "failCgroupV1: true\n"})
	a.start()
	if cgroups.IsCgroup2UnifiedMode() {
		a.waitNode(context.Background(), time.Minute, "registered", func(*corev1.Node) bool { return true })
		return
	}
	if code := a.waitExit(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	const msg = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode"
	if !strings.Contains(a.out.String(), msg) {
		t.Errorf("log lacks %q:\n%s", msg, a.out)
	}
	if _, err := env.Admin.CoreV1().Nodes().Get(context.Background(), a.node, metav1.GetOptions{}); err == nil {
		t.Error("the node registered")
	}
}
