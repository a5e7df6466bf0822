package status

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

func apiPod(rv string, conds ...v1.PodConditionType) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", ResourceVersion: rv}}
	p.Status.Phase = v1.PodRunning
	for _, c := range conds {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: c, Status: v1.ConditionTrue})
	}
	return p
}

func listerOf(t *testing.T, pods ...*v1.Pod) corelisters.PodLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(idx)
}

// Issue 11, bug 3: resource versions are opaque. When the informer's copy
// is not the one our last write returned, the manager cannot tell which is
// newer from the versions: it reads the pod from the API server instead of
// computing a patch against a copy that may be stale.
func TestStatusManagerReadsBackWhenInformerLags(t *testing.T) {
	current := apiPod("rv-b", v1.PodReady) // what our last write left
	client := fake.NewClientset(current)
	s := NewManager(fakePods(client), testlog.New(t))
	stale := apiPod("rv-a") // the informer has not seen our write yet
	stale.Status.Phase = v1.PodPending
	s.SetLister(listerOf(t, stale))
	want := apiPod("").Status // Running, the Ready condition gone
	s.entries[current.UID] = &entry{pod: current, status: want, written: current.DeepCopy()}

	if err := s.sync(context.Background(), current.UID); err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			got = true
		}
	}
	if !got {
		t.Error("no GET although the informer's copy was not our write")
	}
	p, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Conditions) != 0 {
		t.Errorf("the API still has %+v: the patch was computed against the stale copy", p.Status.Conditions)
	}

	// Once the informer has our write, no extra read.
	s.SetLister(listerOf(t, p))
	s.entries[current.UID] = &entry{pod: current, status: apiPod("", v1.PodInitialized).Status, written: p.DeepCopy()}
	client.ClearActions()
	if err := s.sync(context.Background(), current.UID); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			t.Error("GET although the informer had caught up")
		}
	}
}

// Issue 11, bug 5: Flush goes through the queue like every write, so two
// patches of one pod never run at once.
func TestStatusManagerNeverPatchesOnePodConcurrently(t *testing.T) {
	pod := apiPod("1")
	client := fake.NewClientset(pod)
	var inflight, overlaps atomic.Int32
	client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		if inflight.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(5 * time.Millisecond)
		inflight.Add(-1)
		return false, nil, nil
	})
	s := NewManager(fakePods(client), testlog.New(t))
	s.SetLister(listerOf(t, pod))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	conds := []v1.PodConditionType{v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodScheduled}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		s.Set(pod, apiPod("", conds[:i%len(conds)+1]...).Status)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
			defer fcancel()
			if err := s.Flush(fctx, pod.UID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d patches of one pod ran concurrently", n)
	}
}

// fakePods is the Pods getter of client-go's fake Clientset.
func fakePods(c *fake.Clientset) PodsGetter {
	return func(ns string) PodClient { return c.CoreV1().Pods(ns) }
}

// DeletePod sends the final DELETE (grace 0, the UID precondition) only
// for a pod the API server does not remove by itself: a pod marked
// deleted with grace 0 (a terminal pod's deletion, which the API server
// removes in the same request), gone from the informer or re-created
// under another UID gets no request, as kubelet's status manager sends
// none for a pod gone from the API.
func TestStatusManagerDeletePodOnlyWhileInTheAPI(t *testing.T) {
	deletes := func(client *fake.Clientset) []clienttesting.DeleteAction {
		var out []clienttesting.DeleteAction
		for _, a := range client.Actions() {
			if d, ok := a.(clienttesting.DeleteAction); ok {
				out = append(out, d)
			}
		}
		return out
	}
	pod := apiPod("1") // a running pod's graceful deletion
	pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pod.DeletionGracePeriodSeconds = utilptr.To[int64](30)
	other := apiPod("2")
	other.UID = "uid-web-2"
	// A terminal pod's deletion: the API server gives it grace 0 and
	// removes it in the same request (or once its last finalizer goes).
	finished := pod.DeepCopy()
	finished.Status.Phase = v1.PodSucceeded
	finished.DeletionGracePeriodSeconds = utilptr.To[int64](0)
	finished.Finalizers = []string{"example.com/hold"}

	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		lister  corelisters.PodLister // nil: none set
		deletes int
	}{
		{"in the informer", pod, listerOf(t, pod), 1},
		{"no informer", pod, nil, 1},
		{"gone from the informer", pod, listerOf(t), 0},
		{"re-created under another UID", pod, listerOf(t, other), 0},
		{"grace 0", finished, listerOf(t, finished), 0},
		{"grace 0 in the informer only", pod, listerOf(t, finished), 0},
		{"grace 0, no informer", finished, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.pod)
			s := NewManager(fakePods(client), testlog.New(t))
			if tc.lister != nil {
				s.SetLister(tc.lister)
			}
			if err := s.DeletePod(context.Background(), tc.pod); err != nil {
				t.Fatal(err)
			}
			ds := deletes(client)
			if len(ds) != tc.deletes {
				t.Fatalf("%d DELETEs, want %d", len(ds), tc.deletes)
			}
			for _, d := range ds {
				o := d.GetDeleteOptions()
				if d.GetName() != "web" || o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 ||
					o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != pod.UID {
					t.Errorf("DELETE %s %+v, want web with grace 0 and the UID precondition", d.GetName(), o)
				}
			}
		})
	}
}
