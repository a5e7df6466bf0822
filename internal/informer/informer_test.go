package informer

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
)

// recorder lists one pod and records the options of every call.
type recorder struct {
	mu        sync.Mutex
	selectors []string
}

func (r *recorder) List(_ context.Context, o metav1.ListOptions) (*v1.PodList, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.selectors = append(r.selectors, o.FieldSelector)
	return &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}}}, nil
}

func (r *recorder) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.selectors = append(r.selectors, o.FieldSelector)
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported: the fake answers List and Watch, not a
// streaming list (client-go's reflector would wait for its bookmark).
func (r *recorder) IsWatchListSemanticsUnSupported() bool { return true }

func TestNewListsAndWatchesWithTheSelector(t *testing.T) {
	for _, sel := range []string{"spec.nodeName=n1", ""} {
		r := &recorder{}
		inf := New[*v1.PodList](r, sel, &v1.Pod{})
		stop := make(chan struct{})
		go inf.Run(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		cancel()
		if objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns"); len(objs) != 1 {
			t.Errorf("namespace index holds %d pods, want 1", len(objs))
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			r.mu.Lock()
			n := len(r.selectors)
			got := append([]string(nil), r.selectors...)
			r.mu.Unlock()
			if n >= 2 || time.Now().After(deadline) {
				for _, s := range got {
					if s != sel {
						t.Errorf("selector %q sent, want %q (calls %q)", s, sel, got)
					}
				}
				if n < 2 {
					t.Errorf("%d calls, want a list and a watch", n)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(stop)
	}
}

// TestInformersListThenWatch: client-go's streaming list stays off for the
// agent's informers (it is on by default since client-go 0.35), and the
// other gates keep their defaults.
func TestInformersListThenWatch(t *testing.T) {
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Error("WatchListClient is on")
	}
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.InformerResourceVersion) {
		t.Error("InformerResourceVersion (GA, on) is off")
	}
}

// managed lists one pod with two field managers' entries.
type managed struct{ recorder }

func (m *managed) List(ctx context.Context, o metav1.ListOptions) (*v1.PodList, error) {
	l, err := m.recorder.List(ctx, o)
	for i := range l.Items {
		l.Items[i].ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}},
			{Manager: "nodeagent", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		}
		l.Items[i].Labels = map[string]string{"app": "a"}
	}
	return l, err
}

func TestNewStoresObjectsWithoutManagedFields(t *testing.T) {
	inf := New[*v1.PodList](&managed{}, "", &v1.Pod{})
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	obj, ok, err := inf.GetStore().GetByKey("ns/p")
	if err != nil || !ok {
		t.Fatalf("pod ns/p not in the store: %v", err)
	}
	p := obj.(*v1.Pod)
	if p.ManagedFields != nil {
		t.Errorf("stored pod keeps %d managedFields entries, want none", len(p.ManagedFields))
	}
	if p.Labels["app"] != "a" {
		t.Errorf("stored pod lost its labels: %v", p.Labels)
	}
}

func TestStripManagedFieldsPassesTombstones(t *testing.T) {
	ts := cache.DeletedFinalStateUnknown{Key: "ns/p"}
	got, err := StripManagedFields(ts)
	if err != nil || got != ts {
		t.Errorf("StripManagedFields(tombstone) = %v, %v; want it unchanged", got, err)
	}
	// Idempotent.
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	for range 2 {
		if _, err := StripManagedFields(p); err != nil || p.ManagedFields != nil {
			t.Fatalf("StripManagedFields left %v, %v", p.ManagedFields, err)
		}
	}
}
