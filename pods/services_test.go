package pods

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// bigService is a Service as clusters hold them: labels, a
// last-applied-configuration annotation, managed fields.
func bigService(ns string, i int) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("svc-%d", i),
			Labels:      map[string]string{"app": "a", "tier": "backend", "team": "t"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1024)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat("{}", 256))}}},
		},
		Spec: v1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
			Selector: map[string]string{"app": "a"}},
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestServiceInformer: the informer starts on first use, lists every
// Service (trimmed to what the variables need: no annotations or managed
// fields) and costs a few hundred bytes per Service.
func TestServiceInformer(t *testing.T) {
	const n = 2000
	objs := make([]k8sruntime.Object, 0, n)
	for i := range n {
		objs = append(objs, bigService("ns", i))
	}
	cs := fake.NewClientset(objs...)
	s := newServiceInformer(cs.CoreV1().Services(""))
	if _, err := s.List(context.Background(), false); err == nil {
		t.Fatal("List before run: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.run(ctx)
	before := heap()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	var svcs []*v1.Service
	var err error
	for wctx.Err() == nil {
		if svcs, err = s.List(wctx, true); err == nil {
			break
		}
	}
	if err != nil || len(svcs) != n {
		t.Fatalf("List: %d services, %v", len(svcs), err)
	}
	after := heap()
	perService := (int64(after) - int64(before)) / n
	t.Logf("service informer: %d services, %d bytes per service on the heap", n, perService)
	got := svcs[0]
	if len(got.Annotations) != 0 || len(got.ManagedFields) != 0 || got.Spec.Selector != nil ||
		got.Spec.ClusterIP == "" || len(got.Spec.Ports) != 1 {
		t.Errorf("stored service not trimmed to name, IP and ports: %+v", got)
	}
	if perService > 2048 {
		t.Errorf("%d bytes per service, want the trimmed copy to stay under 2 KiB", perService)
	}
}
