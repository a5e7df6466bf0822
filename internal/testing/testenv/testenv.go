// Package testenv gives integration and e2e tests the real local cluster
// (kube-apiserver, etcd, kube-controller-manager, kube-scheduler) and the
// private containerd of internal/testing/localcluster.
//
// One cluster serves a whole test binary. When NODEAGENT_CLUSTER_DIR names a
// running cluster (make test starts one and shares it between all test
// binaries) it is used and left running; otherwise the first test that asks
// starts one in a temporary directory and Main stops it when the binary ends.
// Tests sharing a cluster must use distinct node names (see NodeName).
//
// Packages that use Cluster or Containerd call Main from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
)

var (
	mu       sync.Mutex
	state    *localcluster.State
	startErr error
	owned    bool
	mainRan  bool
)

// Main runs the tests, stops a cluster this binary started and runs
// cleanups (os.Exit skips deferred calls, so TestMain hands them here).
func Main(m *testing.M, cleanups ...func()) {
	mu.Lock()
	mainRan = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	if owned && state != nil {
		_ = localcluster.Down(state.Dir)
		_ = os.RemoveAll(state.Dir)
	}
	mu.Unlock()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}

// Env is the cluster handed to a test.
type Env struct {
	*localcluster.State
	// Admin is a client with system:masters credentials.
	Admin kubernetes.Interface
	// AdminConfig is Admin's rest config.
	AdminConfig *rest.Config
}

// Cluster returns the shared cluster, starting it if needed. It skips the
// test when NODEAGENT_SKIP_CLUSTER is set (for quick unit runs) and fails it
// when the cluster cannot start.
func Cluster(t testing.TB) *Env {
	t.Helper()
	if os.Getenv("NODEAGENT_SKIP_CLUSTER") != "" {
		t.Skip("NODEAGENT_SKIP_CLUSTER is set")
	}
	s, err := get()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig)
	if err != nil {
		t.Fatalf("testenv: admin kubeconfig: %v", err)
	}
	return &Env{State: s, Admin: kubernetes.NewForConfigOrDie(cfg), AdminConfig: cfg}
}

// Containerd returns the address (unix socket path) of the private containerd.
func Containerd(t testing.TB) string {
	t.Helper()
	e := Cluster(t)
	if e.ContainerdAddress == "" {
		t.Fatal("testenv: the shared cluster runs without containerd")
	}
	return e.ContainerdAddress
}

// NodeConfig returns a rest config with node credentials for nodeName, and
// the path of the matching kubeconfig.
func (e *Env) NodeConfig(t testing.TB, nodeName string) (*rest.Config, string) {
	t.Helper()
	path, err := e.NodeKubeconfig(nodeName)
	if err != nil {
		t.Fatalf("testenv: node kubeconfig for %s: %v", nodeName, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return cfg, path
}

// NodeName returns a node name unique to this test, so tests can share a
// cluster (and run in parallel) without seeing each other's nodes.
func NodeName(t testing.TB) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(n) > 40 {
		n = n[:40]
	}
	return strings.Trim(n, "-") + "-" + hex.EncodeToString(b)
}

func get() (*localcluster.State, error) {
	mu.Lock()
	defer mu.Unlock()
	if state != nil || startErr != nil {
		return state, startErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if dir := os.Getenv("NODEAGENT_CLUSTER_DIR"); dir != "" {
		s, err := localcluster.Load(dir)
		if err == nil {
			err = s.Healthy(ctx)
		}
		if err != nil {
			startErr = fmt.Errorf("NODEAGENT_CLUSTER_DIR=%s does not hold a healthy cluster: %v (start it with `hack/localcluster.sh up`)", dir, err)
			return nil, startErr
		}
		state = s
		return state, nil
	}
	if !mainRan {
		startErr = fmt.Errorf("this package starts its own cluster but its TestMain does not call testenv.Main, which stops it")
		return nil, startErr
	}
	root, err := RepoRoot()
	if err != nil {
		startErr = err
		return nil, err
	}
	// A short path: containerd's socket must fit in a unix socket address.
	dir, err := os.MkdirTemp("", "na-")
	if err != nil {
		startErr = err
		return nil, err
	}
	s, err := localcluster.Up(ctx, localcluster.Options{Dir: dir, BinDir: filepath.Join(root, "_output", "bin"), Log: os.Stderr})
	if err != nil {
		_ = localcluster.Down(dir)
		_ = os.RemoveAll(dir)
		startErr = err
		return nil, err
	}
	state, owned = s, true
	return state, nil
}

// RepoRoot finds the repository root (the directory of the product's go.mod).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/nodeagent/nodeagent\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: repository root (go.mod of github.com/nodeagent/nodeagent) not found above the working directory")
		}
		dir = parent
	}
}

// OwnCluster starts a cluster of the test's own (without containerd) with
// o's options (Dir, BinDir and Log are set here), for tests that need
// cluster-wide settings such as a short --cluster-signing-duration; it is
// stopped when the test ends.
func OwnCluster(t testing.TB, o localcluster.Options) *Env {
	t.Helper()
	if os.Getenv("NODEAGENT_SKIP_CLUSTER") != "" {
		t.Skip("NODEAGENT_SKIP_CLUSTER is set")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "na-own-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = localcluster.Down(dir); _ = os.RemoveAll(dir) })
	o.Dir, o.BinDir, o.Log, o.NoContainerd = dir, filepath.Join(root, "_output", "bin"), os.Stderr, true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := localcluster.Up(ctx, o)
	if err != nil {
		t.Fatalf("testenv: own cluster: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig)
	if err != nil {
		t.Fatalf("testenv: admin kubeconfig: %v", err)
	}
	return &Env{State: s, Admin: kubernetes.NewForConfigOrDie(cfg), AdminConfig: cfg}
}
