package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// nsLine reads "key=value" from a container's log.
func nsLine(t *testing.T, log, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)` + regexp.QuoteMeta(key) + `=(\S*)\s*$`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no %s= in:\n%s", key, log)
	}
	return m[1]
}

const nsReport = `echo ipc=$(readlink /proc/self/ns/ipc); echo uts=$(readlink /proc/self/ns/uts); echo pidns=$(readlink /proc/self/ns/pid); echo host=$(hostname)`

// The containers of a pod share its IPC namespace (SysV/POSIX IPC, and
// /dev/shm is the pod's) and its UTS namespace (the pod's hostname), as
// with kubelet and a CRI runtime; not their PID namespaces (no
// shareProcessNamespace); and another pod has its own.
func TestPodSharesIPCAndUTS(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name, other := a.node+"-ipc", a.node+"-ipc2"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: %[1]s
    command: ["sh", "-c", "echo from-a > /dev/shm/x; %[2]s; echo end=1; exec sleep 3601"]
  - name: b
    image: %[1]s
    command: ["sh", "-c", "for i in $(seq 100); do test -f /dev/shm/x && break; sleep 0.1; done; echo shm=$(cat /dev/shm/x); %[2]s; echo end=1; exec sleep 3601"]
`, testimage.Ref, nsReport)), "apply", "-f", "-")
	kubectl(t, a.env, podYAML(other, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: %s
    command: ["sh", "-c", "%s; echo end=1; exec sleep 3601"]
`, testimage.Ref, nsReport)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	p2 := a.waitPod(ctx, other, 60*time.Second, "running", running)
	la, lb := a.waitLog(p, "a", 0, "end=1"), a.waitLog(p, "b", 0, "end=1")
	l2 := a.waitLog(p2, "a", 0, "end=1")
	if got := nsLine(t, lb, "shm"); got != "from-a" {
		t.Errorf("/dev/shm not shared: b read %q", got)
	}
	for _, k := range []string{"ipc", "uts"} {
		if nsLine(t, la, k) != nsLine(t, lb, k) {
			t.Errorf("%s namespace not shared by the pod's containers: %s vs %s", k, nsLine(t, la, k), nsLine(t, lb, k))
		}
		if nsLine(t, la, k) == nsLine(t, l2, k) {
			t.Errorf("two pods share the %s namespace %s", k, nsLine(t, la, k))
		}
		self, _ := os.Readlink("/proc/self/ns/" + k)
		if nsLine(t, la, k) == self {
			t.Errorf("the pod's %s namespace is the host's", k)
		}
	}
	if nsLine(t, la, "pidns") == nsLine(t, lb, "pidns") {
		t.Error("containers share a PID namespace without shareProcessNamespace")
	}
	if h := nsLine(t, lb, "host"); h != name {
		t.Errorf("hostname %q, want the pod's name %q", h, name)
	}
}

// shareProcessNamespace: PID 1 is the pause process, a container sees
// the others' processes and is not PID 1; a container restart keeps the
// namespace; an agent SIGKILL + restart finds the pause (no second one)
// and leaves the pod running; deleting the pod leaves nothing behind.
func TestShareProcessNamespace(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-pidns"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  shareProcessNamespace: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: %[1]s
    command: ["sleep", "3601"]
  - name: b
    image: %[1]s
    command: ["sh", "-c", "for i in $(seq 100); do ps -o args | grep -q '^sleep 3601' && break; sleep 0.1; done; echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); ps -o pid,args; echo self=$$; echo end=1; exec sleep 3602"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)
	// "F end=1": the echo's own line. ps prints b's command line, which
	// holds "echo end=1" too, before self= is written.
	lb := a.waitLog(p, "b", 0, "F end=1")
	if !strings.Contains(lb, "pid1=/pause pause") || !regexp.MustCompile(`(?m)^\S+ stdout F\s+\d+ sleep 3601$`).MatchString(lb) {
		t.Errorf("b does not see the pause as PID 1 and a's sleep:\n%s", lb)
	}
	if nsLine(t, lb, "self") == "1" {
		t.Errorf("a container is PID 1:\n%s", lb)
	}
	pauses := func() []runtime.Pause {
		t.Helper()
		ps, err := rt.ListPauses(ctx, p.UID)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	ps := pauses()
	if len(ps) != 1 || ps[0].State != runtime.StateRunning {
		t.Fatalf("pause containers %+v, want one running", ps)
	}
	pause := ps[0]

	// Container a dies (SIGKILL from the host) and restarts in the same
	// namespace: the pause and b are untouched.
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Pod.UID == p.UID && c.Name == "a" && c.State == runtime.StateRunning {
			if err := syscall.Kill(int(c.Pid), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	p = a.waitPod(ctx, name, 60*time.Second, "a restarted", func(p *corev1.Pod) bool {
		return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if ps := pauses(); len(ps) != 1 || ps[0].ID != pause.ID || ps[0].Pid != pause.Pid {
		t.Errorf("pause after a container restart: %+v, was %+v", ps, pause)
	}
	if rc := p.Status.ContainerStatuses[1].RestartCount; rc != 0 {
		t.Errorf("b restarted %d times when a did", rc)
	}

	// The agent is SIGKILLed and restarted: the same pause, no second one.
	// A second such pod, force-deleted while the agent is down, is an
	// orphan: its pause and namespaces go.
	orphan := a.node + "-pidns-orphan"
	kubectl(t, a.env, podYAML(orphan, a.node, fmt.Sprintf(`  shareProcessNamespace: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: %s
    command: ["sleep", "3601"]
`, testimage.Ref)), "apply", "-f", "-")
	op := a.waitPod(ctx, orphan, 60*time.Second, "running", running)
	if ps, _ := rt.ListPauses(ctx, op.UID); len(ps) != 1 {
		t.Fatalf("pauses of the second pod: %+v", ps)
	}
	a.stop(syscall.SIGKILL)
	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, orphan, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	for deadline := time.Now().Add(15 * time.Second); !a.out.Contains("pod sources synced") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the pod's first sync after the restart
	if ps := pauses(); len(ps) != 1 || ps[0].ID != pause.ID {
		t.Errorf("pauses after an agent restart: %+v, was %+v", ps, pause)
	}
	if a.out.Contains("started the pod's pause process") || a.out.Contains("started container") {
		t.Errorf("the restarted agent started a pause or a container:\n%s", a.out)
	}
	p = a.waitPod(ctx, name, 10*time.Second, "running", running)
	if rc := p.Status.ContainerStatuses[0].RestartCount + p.Status.ContainerStatuses[1].RestartCount; rc != 1 {
		t.Errorf("restart counts after the agent restart: %+v", p.Status.ContainerStatuses)
	}

	orphanDir := filepath.Join(a.podNSDir(), string(op.UID))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ps, err := rt.ListPauses(ctx, op.UID)
		return err == nil && len(ps) == 0 && !fileExists(orphanDir), nil
	})
	if err != nil {
		t.Errorf("the orphan's pause or namespaces are left after the restart: %v", err)
	}

	// Deleted: the pause, its namespaces and mounts are gone.
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod not deleted: %v", err)
	}
	nsDir := filepath.Join(a.podNSDir(), string(p.UID))
	var left []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		if ps := pauses(); len(ps) > 0 {
			left = append(left, fmt.Sprintf("pause containers %+v", ps))
		}
		if _, err := os.Stat(nsDir); err == nil {
			left = append(left, nsDir)
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), string(p.UID)) {
			left = append(left, "mounts naming the pod's UID")
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left behind after the pod's deletion: %q", left)
	}
}
