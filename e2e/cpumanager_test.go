package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodeagent/nodeagent/cm/cpumanager/state"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// The static CPU manager policy on this host's CPUs, with CPU 0 reserved
// (reservedSystemCPUs): a Guaranteed pod with cpu: 1 runs on CPU 1 alone
// (/proc/self/status in its container); a BestEffort pod runs on the
// shared pool, 0-1, then 0 once the Guaranteed pod holds CPU 1, and 0-1
// again within the reconcile period after it is deleted; a second
// Guaranteed cpu: 1 pod is rejected with kubelet's reason and message;
// the container with exclusive CPUs and its pod cgroup have no CFS quota;
// the pod-resources API reports the exclusive CPU; the assignments are in
// rootDir/cpu_manager_state in kubelet's format
// (checksum included) and survive an agent restart.
func TestCPUManagerStatic(t *testing.T) {
	t.Parallel()
	start := time.Now()
	const period = 2 * time.Second
	a, _ := readyPodAgent(t, fmt.Sprintf("cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerReconcilePeriod: %s\n", period))
	ctx := context.Background()
	sleeper := func(name, resources string) string {
		return podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
%s`, testimage.Ref, resources))
	}
	// cpus is Cpus_allowed_list of a process in the pod's container (the
	// test image has no grep: the shell reads its own status).
	cpusOrErr := func(name string) (string, error) {
		out, err := kubectlOut(t, a.env, "exec", name, "--", "sh", "-c",
			`while read -r k v; do [ "$k" = Cpus_allowed_list: ] && echo "$v"; done < /proc/self/status; true`)
		return strings.TrimSpace(out), err
	}
	cpus := func(name string) string {
		t.Helper()
		out, err := cpusOrErr(name)
		if err != nil {
			t.Fatalf("exec in %s: %v: %s", name, err, out)
		}
		return out
	}
	// waitCPUs polls a container's CPUs, within two reconcile periods.
	waitCPUs := func(name, want, what string) {
		t.Helper()
		var got string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*period+3*time.Second, true, func(context.Context) (bool, error) {
			var err error
			got, err = cpusOrErr(name)
			return err == nil && got == want, nil
		})
		if err != nil {
			t.Fatalf("%s: pod %s runs on CPUs %q, want %q", what, name, got, want)
		}
	}
	checkpoint := func() state.State {
		t.Helper()
		st, err := state.Read(a.rootDir())
		if err != nil {
			t.Fatalf("cpu_manager_state: %v", err)
		}
		return st
	}

	be, g, g2 := a.node+"-be", a.node+"-g", a.node+"-g2"
	kubectl(t, a.env, sleeper(be, ""), "apply", "-f", "-")
	a.waitPod(ctx, be, 60*time.Second, "running", running)
	if got := cpus(be); got != "0-1" {
		t.Errorf("best-effort pod alone runs on %q, want 0-1", got)
	}

	guaranteed := "    resources: {limits: {cpu: \"1\", memory: 64Mi}}\n"
	kubectl(t, a.env, sleeper(g, guaranteed), "apply", "-f", "-")
	gp := a.waitPod(ctx, g, 60*time.Second, "running", running)
	if got := cpus(g); got != "1" {
		t.Errorf("guaranteed pod runs on %q, want 1", got)
	}
	waitCPUs(be, "0", "after the guaranteed pod took CPU 1")
	// No CFS quota on the container with exclusive CPUs nor on its pod's
	// cgroup (DisableCPUQuotaWithExclusiveCPUs, on in kubelet 1.34); the
	// status still says the allocated limit.
	gid := strings.TrimPrefix(gp.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if _, q := cgroupLimits(t, string(gp.UID), gid); !strings.HasPrefix(q, "-1 ") && !strings.HasPrefix(q, "max ") {
		t.Errorf("guaranteed container's CFS quota %q, want none", q)
	}
	if q := podCgroupFile(t, "/nodeagent-e2e-"+a.node+"/kubepods/pod"+string(gp.UID), "cpu.max"); q != "-1" && !strings.HasPrefix(q, "max") {
		t.Errorf("guaranteed pod cgroup's CFS quota %q, want none", q)
	}
	if r := gp.Status.ContainerStatuses[0].Resources; r == nil || r.Limits.Cpu().String() != "1" {
		t.Errorf("guaranteed container's status resources %v, want cpu limit 1", r)
	}
	// kubepods and the pod cgroups keep every CPU: only containers are
	// pinned.
	for _, p := range []string{"/nodeagent-e2e-" + a.node + "/kubepods", "/nodeagent-e2e-" + a.node + "/kubepods/pod" + string(gp.UID)} {
		if got := cgroupCPUs(t, p); got != "0-1" {
			t.Errorf("cgroup %s has CPUs %q, want 0-1", p, got)
		}
	}
	// The pod-resources API reports the exclusive CPU, and the CPUs that
	// may be given exclusively, as kubelet.
	exclusive, allocatable := podResources(t, a, func(c podresourcesapi.PodResourcesListerClient, ctx context.Context) ([]int64, []int64) {
		r, err := c.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: g, PodNamespace: "default"}, grpc.WaitForReady(true))
		if err != nil || len(r.PodResources.Containers) != 1 {
			t.Fatalf("pod-resources Get: %v %v", r, err)
		}
		al, err := c.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
		if err != nil {
			t.Fatalf("pod-resources GetAllocatableResources: %v", err)
		}
		return r.PodResources.Containers[0].CpuIds, al.CpuIds
	})
	if fmt.Sprint(exclusive) != "[1]" || fmt.Sprint(allocatable) != "[1]" {
		t.Errorf("pod-resources: cpu_ids %v, allocatable %v; want [1] and [1]", exclusive, allocatable)
	}
	st := checkpoint()
	if st.Policy != "static" || st.Default.String() != "0" || len(st.Assign) != 1 || st.Assign[string(gp.UID)]["c"].String() != "1" {
		t.Errorf("checkpoint %+v, want policy static, defaultCpuSet 0, %s/c on 1", st, gp.UID)
	}

	// No CPU is left for a second one: kubelet's admission error.
	kubectl(t, a.env, sleeper(g2, guaranteed), "apply", "-f", "-")
	rp := a.waitPod(ctx, g2, 30*time.Second, "rejected", phaseIs(corev1.PodFailed))
	msg := "Pod was rejected: Allocate failed due to not enough cpus available to satisfy request: requested=1, available=0, which is unexpected"
	if rp.Status.Reason != "UnexpectedAdmissionError" || rp.Status.Message != msg {
		t.Errorf("second guaranteed pod: reason %q message %q, want UnexpectedAdmissionError %q", rp.Status.Reason, rp.Status.Message, msg)
	}

	// An agent restart keeps the assignment.
	a.stop(syscall.SIGTERM)
	a.start()
	a.waitReady(ctx, 30*time.Second)
	if st := checkpoint(); st.Assign[string(gp.UID)]["c"].String() != "1" || st.Default.String() != "0" {
		t.Errorf("checkpoint after restart %+v", st)
	}
	// (The node API knows the pod once the agent admitted it again.)
	waitCPUs(g, "1", "after the agent's restart")
	if got := cpus(be); got != "0" {
		t.Errorf("best-effort pod after restart runs on %q, want 0", got)
	}

	// Deleted, the guaranteed pod gives CPU 1 back to the shared pool.
	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, g, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitCPUs(be, "0-1", "after the guaranteed pod was deleted")
	if st := checkpoint(); len(st.Assign) != 0 || st.Default.String() != "0-1" {
		t.Errorf("checkpoint after the deletion %+v", st)
	}
	t.Logf("took %s", time.Since(start).Round(100*time.Millisecond))
}

// cgroupCPUs is the CPUs cgroup p may use: cpuset.cpus.effective (v2),
// or cpuset.cpus (v1), of p or, on v1 where p has no cpuset directory,
// of its closest ancestor that has one.
func cgroupCPUs(t *testing.T, p string) string {
	t.Helper()
	if cgroups.IsCgroup2UnifiedMode() {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", p, "cpuset.cpus.effective"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	for dir := p; ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", dir, "cpuset.cpus"))
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if dir == "/" {
			t.Fatalf("no cpuset for %s: %v", p, err)
		}
	}
}
