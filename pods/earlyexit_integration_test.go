package pods

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A container whose process exits while containerd's Start is still
// running ends as its exit says: a restartPolicy Never pod whose container
// exited 0 is Succeeded (terminated, Completed, exit code 0), one whose
// container exited 1 is Failed with exit code 1. Real containerd and
// runc, runc start slowed down by a wrapper (its shim then answers no
// state query for 6s), and a PLEG that relists every 20ms (relisting is
// what the PLEG falls back to when an event source fails, every second:
// the cgroup v2 guest's did around early exits). Against containerd 2.x,
// the relists during a start took the container, left out of the task
// list, for one that had exited with an unknown code (-1): those pods
// ended Failed, for good, although their containers exited 0 (issue 27's
// run 4: docs/pods.md).
func TestEarlyExitBeforeStartReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	t.Setenv(testimage.RuncEnv, testimage.SlowStartRunc(t, 6*time.Second))
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cd := testimage.StartContainerd(t)
	rt, err := runtime.New(runtime.Options{Address: cd.Address, CgroupParent: cd.CgroupParent, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := testimage.Import(ctx, rt); err != nil {
		t.Fatal(err)
	}
	pl, err := pleg.New(rt, pleg.Options{
		FallbackRelistPeriod: 20 * time.Millisecond, // no sources: relisting only
		Logger:               log,
		Registerer:           prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	go pl.Run(ctx)

	dir, root, nsDir, podLogs := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	t.Cleanup(func() {
		es, _ := os.ReadDir(nsDir)
		for _, e := range es {
			_ = netns.Remove(filepath.Join(nsDir, e.Name()))
		}
		es, _ = os.ReadDir(filepath.Join(root, "pods"))
		for _, e := range es {
			_ = volume.TeardownVolumes(filepath.Join(root, "pods", e.Name()))
		}
	})
	m, err := New(Options{
		Client:   fakeClient(fake.NewClientset()),
		NodeName: "node-1", StaticPodPath: dir, RootDir: root, NetNSDir: nsDir, PodLogsDir: podLogs,
		Runtime: rt, PLEG: pl, PodCache: pl.Cache(), Registerer: prometheus.NewRegistry(), Logger: log,
		HostIP:         func() string { return "192.0.2.1" },
		StaticDebounce: 20 * time.Millisecond,
		NodeAnyway: func(context.Context) (*v1.Node, error) {
			n := &v1.Node{}
			n.Name = "node-1"
			n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}
			return n, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Several at once: each start is slow, and every relist meanwhile
	// meets the others' busy shims too.
	cases := []struct {
		name  string
		code  int32
		phase v1.PodPhase
	}{
		{"fails", 1, v1.PodFailed},
		{"ok0", 0, v1.PodSucceeded}, {"ok1", 0, v1.PodSucceeded}, {"ok2", 0, v1.PodSucceeded}, {"ok3", 0, v1.PodSucceeded},
	}

	for _, tc := range cases {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "exit %d"]
`, tc.name, testimage.Ref, tc.code)
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, tc.name+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		var pod *v1.Pod
		deadline := time.Now().Add(60 * time.Second)
		for {
			p, ok := m.GetPodByName("default", tc.name+"-node-1")
			if ok && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) {
				pod = p
				break
			}
			if time.Now().After(deadline) {
				if !ok {
					t.Fatalf("pod %s not found", tc.name)
				}
				t.Fatalf("pod %s not terminal in 60s: %+v", tc.name, p.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if pod.Status.Phase != tc.phase {
			t.Errorf("pod %s (exit %d): phase %s, want %s; status %+v", tc.name, tc.code, pod.Status.Phase, tc.phase, pod.Status.ContainerStatuses)
		}
		if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != tc.code || cs[0].RestartCount != 0 {
			t.Errorf("pod %s: container status %+v, want terminated with exit code %d, no restart", tc.name, cs, tc.code)
		}
	}
	// The pods removed, and what they had on the host with them (their
	// mounts under the test's directories).
	for _, tc := range cases {
		if err := os.Remove(filepath.Join(dir, tc.name+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(m.Pods()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pods not removed in 60s: %v", m.Pods())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
