package objcache

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestStore(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	cs := fake.NewClientset()
	gets := 0
	var failWith error
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		gets++
		if failWith != nil {
			return true, nil, failWith
		}
		return false, nil, nil
	})
	s := ConfigMaps(cs, clk, time.Minute)

	// Missing: NotFound, not cached.
	if _, err := s.Get(ctx, "ns", "cm", false); !apierrors.IsNotFound(err) || err.Error() != `configmap "cm" not found` {
		t.Fatalf("missing object: err %v, want kubelet's NotFound", err)
	}
	if _, err := s.Get(ctx, "ns", "cm", false); !apierrors.IsNotFound(err) || gets != 2 {
		t.Fatalf("NotFound must not be cached: err %v, gets %d", err, gets)
	}
	// Created: fetched, then cached for the TTL.
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "1"}}
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "ns", "cm", false)
	if err != nil || got.Data["k"] != "1" {
		t.Fatalf("Get = %v, %v", got, err)
	}
	cm.Data["k"] = "2"
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := gets
	if got, _ := s.Get(ctx, "ns", "cm", false); got.Data["k"] != "1" || gets != before {
		t.Fatalf("within the TTL: got %v after %d gets, want the cached copy without a GET", got.Data, gets-before)
	}
	if got, _ := s.Get(ctx, "ns", "cm", true); got.Data["k"] != "2" {
		t.Fatalf("fresh: got %v, want the update", got.Data)
	}
	cm.Data["k"] = "3"
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if got, _ := s.Get(ctx, "ns", "cm", false); got.Data["k"] != "3" {
		t.Fatalf("after the TTL: got %v, want the update", got.Data)
	}
	// An outage returns the copy; with no copy, the error.
	clk.Step(time.Minute)
	failWith = errors.New("connection refused")
	if got, err := s.Get(ctx, "ns", "cm", false); err != nil || got.Data["k"] != "3" {
		t.Fatalf("outage with a copy: %v, %v; want the copy", got, err)
	}
	if _, err := s.Get(ctx, "ns", "other", false); err == nil {
		t.Fatal("outage without a copy: want the error")
	}
	// Deleted: NotFound drops the copy.
	failWith = nil
	if err := cs.CoreV1().ConfigMaps("ns").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ns", "cm", true); !apierrors.IsNotFound(err) || s.Len() != 0 {
		t.Fatalf("deleted: err %v, %d cached; want NotFound and nothing cached", err, s.Len())
	}
}
