package heartbeat_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/nodeagent/heartbeat"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// verbs records the Lease requests and their outcome.
type verbs struct {
	heartbeat.LeaseClient
	mu  sync.Mutex
	got []string
}

func (v *verbs) note(verb string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case apierrors.IsConflict(err):
		verb += "(409)"
	case err != nil:
		verb += "(" + err.Error() + ")"
	}
	v.got = append(v.got, verb)
}

func (v *verbs) take() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := fmt.Sprint(v.got)
	v.got = nil
	return s
}

func (v *verbs) Get(ctx context.Context, n string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	l, err := v.LeaseClient.Get(ctx, n, o)
	v.note("get", err)
	return l, err
}

func (v *verbs) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := v.LeaseClient.Create(ctx, l, o)
	v.note("create", err)
	return out, err
}

func (v *verbs) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out, err := v.LeaseClient.Update(ctx, l, o)
	v.note("update", err)
	return out, err
}

func (v *verbs) Patch(ctx context.Context, n string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*coordinationv1.Lease, error) {
	out, err := v.LeaseClient.Patch(ctx, n, pt, data, o, sub...)
	v.note("patch", err)
	return out, err
}

// With node credentials against the real API server (Node authorizer,
// NodeRestriction): a renewal that meets a conflict is carried out by a
// merge patch, which the node may make on its own Lease, and the renewal
// after it is a plain update again.
func TestConflictIsPatchedOnTheRealAPIServer(t *testing.T) {
	env := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := testenv.NodeName(t)
	path, err := env.State.NodeKubeconfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := &verbs{LeaseClient: cs.Leases(heartbeat.Namespace)}
	c, err := heartbeat.New(heartbeat.Options{NodeName: name, Leases: v, Nodes: cs.Nodes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Admin.CoordinationV1().Leases(heartbeat.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	_ = v.take() // the first renewal reads and creates the Lease
	// Someone else writes the Lease: the agent's copy is stale.
	leases := env.Admin.CoordinationV1().Leases(heartbeat.Namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := l.Spec.RenewTime.Time
	l.Labels = map[string]string{"touched": "yes"}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // renewTime has microseconds
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("renewal after a conflict: %v", err)
	}
	if got := v.take(); got != "[update(409) patch]" {
		t.Errorf("Lease requests = %s, want [update(409) patch]", got)
	}
	l, err = leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Spec.RenewTime.Time.After(before) || *l.Spec.HolderIdentity != name || l.Labels["touched"] != "yes" {
		t.Errorf("patched Lease: renewTime %v (before %v), holder %s, labels %v", l.Spec.RenewTime, before, *l.Spec.HolderIdentity, l.Labels)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := v.take(); got != "[update]" {
		t.Errorf("the renewal after the patch made %s, want [update]", got)
	}
}
