package pods_test

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

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Static pods without an API server, against a real containerd and the
// event-driven PLEG: a manifest starts its pod, an edit replaces it, a
// crashing container is restarted, removing the file removes everything the
// pod had on the host. Run it with -race: it is the one test that drives
// the manager, the workers and the static source together in process.
func TestManagerRunsStaticPods(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	log := slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
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
		Sources:       []pleg.Source{pleg.SourceContainerd, pleg.SourceCgroups},
		Logger:        log,
		Registerer:    prometheus.NewRegistry(),
		CgroupParents: []string{cd.CgroupParent},
	})
	if err != nil {
		t.Fatal(err)
	}
	go pl.Run(ctx)

	dir, root, nsDir, podLogs := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	t.Cleanup(func() { // after a failure: what the pods left mounted
		es, _ := os.ReadDir(nsDir)
		for _, e := range es {
			_ = netns.Remove(filepath.Join(nsDir, e.Name()))
		}
		es, _ = os.ReadDir(filepath.Join(root, "pods"))
		for _, e := range es {
			_ = volume.TeardownVolumes(filepath.Join(root, "pods", e.Name()))
		}
	})
	reg := prometheus.NewRegistry()
	m, err := pods.New(pods.Options{
		NodeName: "node-1", StaticPodPath: dir, RootDir: root, NetNSDir: nsDir, PodLogsDir: podLogs,
		Runtime: rt, PLEG: pl, PodCache: pl.Cache(), Registerer: reg, Logger: log,
		HostIP:         func() string { return "192.0.2.1" },
		StaticDebounce: 20 * time.Millisecond,
		// No API server: the node is only known from the host, as after an
		// agent restart before the Node informer synced.
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
	// What a pod left when the agent stopped in the middle of its cleanup:
	// no containers, but its directory, network namespace and logs (in
	// the layout before podLogsDir too); and a pod that left only its
	// log directory.
	const leftover = "0123456789abcdef0123456789abcdef"
	leftovers := []string{
		filepath.Join(root, "pods", leftover),
		filepath.Join(nsDir, leftover),
		filepath.Join(root, "logs", "default_gone_"+leftover),
		filepath.Join(podLogs, "default_gone_"+leftover),
		filepath.Join(podLogs, "default_logs-only_fedcba9876543210fedcba9876543210"),
	}
	if err := os.MkdirAll(filepath.Join(leftovers[0], "volumes", "empty-dir", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := netns.Create(leftovers[1]); err != nil {
		t.Fatal(err)
	}
	for _, l := range leftovers[2:] {
		if err := os.MkdirAll(filepath.Join(l, "c"), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	manifest := func(name, script string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: scratch, emptyDir: {medium: Memory}}]
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", %q]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
    resources: {requests: {cpu: 100m, memory: 16Mi}}
`, name, testimage.Ref, script)
	}
	write := func(file, content string) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
	}
	// running lists the pod's running containers (pod name → attempts).
	running := func() map[string][]uint32 {
		cs, err := rt.ListContainers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]uint32{}
		for _, c := range cs {
			if c.State == runtime.StateRunning {
				out[c.Pod.Name] = append(out[c.Pod.Name], c.Attempt)
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				cs, _ := rt.ListContainers(ctx)
				t.Fatalf("timed out waiting for %s; containers: %+v", what, cs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	for _, p := range leftovers {
		waitFor("the leftover "+p+" removed", func() bool { _, err := os.Stat(p); return os.IsNotExist(err) })
	}

	write("web.yaml", manifest("web", "echo v1 > /scratch/v; exec sleep 600"))
	waitFor("web running", func() bool { return len(running()["web-node-1"]) == 1 })
	uids := m.Pods()
	if len(uids) != 1 {
		t.Fatalf("workers: %v", uids)
	}
	first := uids[0]
	if _, err := os.Stat(filepath.Join(nsDir, string(first))); err != nil {
		t.Errorf("no network namespace for the pod: %v", err)
	}

	// An edit replaces the pod (new UID); the old one's state goes.
	write("web.yaml", manifest("web", "echo v2 > /scratch/v; exec sleep 600"))
	waitFor("the new version running alone", func() bool {
		us := m.Pods()
		return len(us) == 1 && us[0] != first && len(running()["web-node-1"]) == 1
	})
	for _, p := range []string{filepath.Join(nsDir, string(first)), filepath.Join(root, "pods", string(first))} {
		waitFor("the old version's "+p+" removed", func() bool { _, err := os.Stat(p); return os.IsNotExist(err) })
	}

	// A crashing container is restarted (the first restart is immediate).
	write("crash.yaml", manifest("crash", "sleep 0.2; exit 1"))
	waitFor("crash restarted", func() bool {
		n, ok := counter(t, reg, "nodeagent_pods_container_starts_total", "restart")
		return ok && n >= 1
	})

	// Removing the files removes the pods and what they left.
	for _, f := range []string{"web.yaml", "crash.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("every worker ended", func() bool { return len(m.Pods()) == 0 })
	// A worker leaves Pods() as it ends; the manager removes the pod's log
	// directory just after (workerDone, podlogs.go).
	waitFor("every pod's log directory removed", func() bool {
		es, _ := os.ReadDir(podLogs)
		return len(es) == 0
	})
	cs, _ := rt.ListContainers(ctx)
	if len(cs) != 0 {
		t.Errorf("containers left: %+v", cs)
	}
	if es, _ := os.ReadDir(filepath.Join(root, "pods")); len(es) != 0 {
		t.Errorf("pod directories left: %v", es)
	}
	if es, _ := os.ReadDir(nsDir); len(es) != 0 {
		t.Errorf("network namespaces left: %v", es)
	}
	for _, d := range []string{filepath.Join(root, "logs"), podLogs} {
		if es, _ := os.ReadDir(d); len(es) != 0 {
			t.Errorf("log directories left in %s: %v", d, es)
		}
	}
}

// counter reads a counter with label kind from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, kind string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "kind" && lp.GetValue() == kind {
					return mt.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
