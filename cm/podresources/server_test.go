package podresources

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/devicemanager"
)

type fakePods []*v1.Pod

func (f fakePods) ActivePods() []*v1.Pod { return f }
func (f fakePods) GetPodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range f {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type fakeDevices struct{}

func (fakeDevices) ContainerDevicesOf(uid types.UID, c string) []devicemanager.ContainerDevices {
	if uid == "u1" && c == "app" {
		return []devicemanager.ContainerDevices{{Resource: "example.com/dev", ByNUMA: map[int64][]string{-1: {"d1"}, 0: {"d0"}}}}
	}
	return nil
}

func (fakeDevices) AllocatableDevices() map[string][]*pluginapi.Device {
	return map[string][]*pluginapi.Device{"example.com/dev": {
		{ID: "d0", Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}},
		{ID: "d1", Health: pluginapi.Healthy}}}
}

type fakeCPUs struct{}

func (fakeCPUs) Exclusive(uid, c string) cpuset.CPUSet {
	if uid == "u1" && c == "app" {
		return cpuset.New(2, 3)
	}
	return cpuset.New()
}

func (fakeCPUs) Allocatable() cpuset.CPUSet { return cpuset.New(1, 2, 3) }

func TestServer(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}, {Name: "sidecar", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "app"}}}}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	if err := Serve(ctx, dir, &Server{Pods: fakePods{pod}, Devices: fakeDevices{}, CPUs: fakeCPUs{}, Metrics: NewMetrics(reg)}, slog.Default()); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := api.NewPodResourcesListerClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()

	wantPod := &api.PodResources{Name: "p", Namespace: "ns", Containers: []*api.ContainerResources{
		{Name: "sidecar"},
		{Name: "app", CpuIds: []int64{2, 3}, Devices: []*api.ContainerDevices{
			{ResourceName: "example.com/dev", DeviceIds: []string{"d1"}},
			{ResourceName: "example.com/dev", DeviceIds: []string{"d0"}, Topology: &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: 0}}}},
		}},
	}}
	list, err := c.List(cctx, &api.ListPodResourcesRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&api.ListPodResourcesResponse{PodResources: []*api.PodResources{wantPod}}, list, protocmp.Transform()); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
	got, err := c.Get(cctx, &api.GetPodResourcesRequest{PodName: "p", PodNamespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantPod, got.PodResources, protocmp.Transform()); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	if _, err := c.Get(cctx, &api.GetPodResourcesRequest{PodName: "x", PodNamespace: "ns"}); err == nil ||
		status.Convert(err).Message() != "pod x in namespace ns not found" {
		t.Errorf("Get of a missing pod = %v", err)
	}
	alloc, err := c.GetAllocatableResources(cctx, &api.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantAlloc := &api.AllocatableResourcesResponse{CpuIds: []int64{1, 2, 3}, Devices: []*api.ContainerDevices{
		{ResourceName: "example.com/dev", DeviceIds: []string{"d0"}, Topology: &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: 0}}}},
		{ResourceName: "example.com/dev", DeviceIds: []string{"d1"}},
	}}
	if d := cmp.Diff(wantAlloc, alloc, protocmp.Transform()); d != "" {
		t.Errorf("GetAllocatableResources (-want +got):\n%s", d)
	}
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kubelet_pod_resources_endpoint_errors_get Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version.
# TYPE kubelet_pod_resources_endpoint_errors_get counter
kubelet_pod_resources_endpoint_errors_get{server_api_version="v1"} 1
# HELP kubelet_pod_resources_endpoint_requests_get Number of requests to the PodResource Get endpoint. Broken down by server api version.
# TYPE kubelet_pod_resources_endpoint_requests_get counter
kubelet_pod_resources_endpoint_requests_get{server_api_version="v1"} 2
# HELP kubelet_pod_resources_endpoint_requests_total Cumulative number of requests to the PodResource endpoint. Broken down by server api version.
# TYPE kubelet_pod_resources_endpoint_requests_total counter
kubelet_pod_resources_endpoint_requests_total{server_api_version="v1"} 4
`), "kubelet_pod_resources_endpoint_errors_get", "kubelet_pod_resources_endpoint_requests_get", "kubelet_pod_resources_endpoint_requests_total"); err != nil {
		t.Error(err)
	}
	// Beyond the burst within one second: rejected.
	limited := false
	for i := 0; i < 1000 && !limited; i++ {
		_, err := c.List(cctx, &api.ListPodResourcesRequest{})
		limited = status.Code(err) == codes.ResourceExhausted
	}
	if !limited {
		t.Error("no request was rate limited")
	}
}
