// Package podresources serves kubelet's pod-resources API v1
// (k8s.io/kubelet/pkg/apis/podresources/v1) on
// <rootDir>/pod-resources/kubelet.sock: List (the active pods), Get (a
// pod by namespace and name) and GetAllocatableResources, with the
// devices device plugins gave each container and its exclusive CPUs
// (cpu_ids; with the static CPU manager policy, and in
// GetAllocatableResources the CPUs not reserved, as kubelet; empty with
// none). Memory is reported as kubelet reports it with the None memory
// manager policy (no NUMA memory blocks: empty); dynamic
// resources (DRA) are not reported. Requests beyond kubelet's rate limit
// (100 per second, bursts of 10) get ResourceExhausted "rejected by rate
// limit". The v1alpha1 service is not served.
package podresources

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/cm/devicemanager"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// Kubelet's constants.
const (
	// SocketName is the socket in <rootDir>/pod-resources.
	SocketName = "kubelet.sock"
	// DefaultQPS and DefaultBurst are kubelet's rate limit.
	DefaultQPS   = 100
	DefaultBurst = 10
)

// Pods are the pods the node runs (*pods.Manager).
type Pods interface {
	ActivePods() []*v1.Pod
	GetPodByName(namespace, name string) (*v1.Pod, bool)
}

// Devices are the device plugins' allocations (*devicemanager.Manager).
type Devices interface {
	ContainerDevicesOf(uid types.UID, container string) []devicemanager.ContainerDevices
	AllocatableDevices() map[string][]*pluginapi.Device
}

// CPUs are the CPU manager's assignments (*cpumanager.Manager).
type CPUs interface {
	// Exclusive are a container's exclusive CPUs.
	Exclusive(uid, container string) cpuset.CPUSet
	// Allocatable are the CPUs that may be given exclusively.
	Allocatable() cpuset.CPUSet
}

// Server implements api.PodResourcesListerServer.
type Server struct {
	api.UnimplementedPodResourcesListerServer
	Pods    Pods
	Devices Devices // nil: no device plugins
	CPUs    CPUs    // nil: no CPU manager
	// Metrics are kubelet's pod-resources endpoint counters (NewMetrics);
	// nil: none.
	Metrics *Metrics
}

// Metrics are kubelet's pod-resources endpoint metrics, under kubelet's
// names, by server_api_version ("v1").
type Metrics struct {
	requests, list, getAllocatable, get, getErrors *prometheus.CounterVec
}

// NewMetrics makes the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: name, Help: help}, []string{"server_api_version"})
	}
	m := &Metrics{
		requests:       c("pod_resources_endpoint_requests_total", "Cumulative number of requests to the PodResource endpoint. Broken down by server api version."),
		list:           c("pod_resources_endpoint_requests_list", "Number of requests to the PodResource List endpoint. Broken down by server api version."),
		getAllocatable: c("pod_resources_endpoint_requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version."),
		get:            c("pod_resources_endpoint_requests_get", "Number of requests to the PodResource Get endpoint. Broken down by server api version."),
		getErrors:      c("pod_resources_endpoint_errors_get", "Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version."),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.list, m.getAllocatable, m.get, m.getErrors)
	}
	return m
}

func (m *Metrics) inc(c ...func(*Metrics) *prometheus.CounterVec) {
	if m == nil {
		return
	}
	for _, f := range c {
		f(m).WithLabelValues("v1").Inc()
	}
}

func requestsTotal(m *Metrics) *prometheus.CounterVec  { return m.requests }
func listRequests(m *Metrics) *prometheus.CounterVec   { return m.list }
func allocRequests(m *Metrics) *prometheus.CounterVec  { return m.getAllocatable }
func getRequests(m *Metrics) *prometheus.CounterVec    { return m.get }
func getErrorsCount(m *Metrics) *prometheus.CounterVec { return m.getErrors }

var _ api.PodResourcesListerServer = (*Server)(nil)

// List is every active pod's resources.
func (s *Server) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	s.Metrics.inc(requestsTotal, listRequests)
	pods := s.Pods.ActivePods()
	out := &api.ListPodResourcesResponse{PodResources: make([]*api.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.podResources(p))
	}
	return out, nil
}

// Get is one pod's resources.
func (s *Server) Get(_ context.Context, req *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	s.Metrics.inc(requestsTotal, getRequests)
	p, ok := s.Pods.GetPodByName(req.PodNamespace, req.PodName)
	if !ok {
		s.Metrics.inc(getErrorsCount)
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	return &api.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
}

// GetAllocatableResources is the node's healthy devices (one entry per
// device and NUMA node, as kubelet).
func (s *Server) GetAllocatableResources(context.Context, *api.AllocatableResourcesRequest) (*api.AllocatableResourcesResponse, error) {
	s.Metrics.inc(requestsTotal, allocRequests)
	out := &api.AllocatableResourcesResponse{}
	if s.CPUs != nil {
		out.CpuIds = cpuIDs(s.CPUs.Allocatable())
	}
	if s.Devices == nil {
		return out, nil
	}
	all := s.Devices.AllocatableDevices()
	for _, res := range slices.Sorted(maps.Keys(all)) {
		for _, d := range all[res] {
			if d.Topology == nil || len(d.Topology.Nodes) == 0 {
				out.Devices = append(out.Devices, &api.ContainerDevices{ResourceName: res, DeviceIds: []string{d.ID}})
				continue
			}
			for _, n := range d.Topology.Nodes {
				out.Devices = append(out.Devices, &api.ContainerDevices{ResourceName: res, DeviceIds: []string{d.ID},
					Topology: &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: n.ID}}}})
			}
		}
	}
	return out, nil
}

// podResources lists the pod's sidecars and regular containers, as
// kubelet (other init containers have ended).
func (s *Server) podResources(p *v1.Pod) *api.PodResources {
	out := &api.PodResources{Name: p.Name, Namespace: p.Namespace}
	for _, c := range kubetypes.ProbedContainers(p) {
		out.Containers = append(out.Containers, s.containerResources(p.UID, c.Name))
	}
	return out
}

func (s *Server) containerResources(uid types.UID, name string) *api.ContainerResources {
	out := &api.ContainerResources{Name: name}
	if s.CPUs != nil {
		out.CpuIds = cpuIDs(s.CPUs.Exclusive(string(uid), name))
	}
	if s.Devices == nil {
		return out
	}
	for _, cd := range s.Devices.ContainerDevicesOf(uid, name) {
		for _, numa := range slices.Sorted(maps.Keys(cd.ByNUMA)) {
			for _, id := range cd.ByNUMA[numa] {
				d := &api.ContainerDevices{ResourceName: cd.Resource, DeviceIds: []string{id}}
				if numa >= 0 {
					d.Topology = &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: numa}}}
				}
				out.Devices = append(out.Devices, d)
			}
		}
	}
	return out
}

func cpuIDs(set cpuset.CPUSet) []int64 {
	var out []int64
	for _, c := range set.List() {
		out = append(out, int64(c))
	}
	return out
}

// Serve serves s on <dir>/kubelet.sock until ctx ends; a stale socket is
// replaced.
func Serve(ctx context.Context, dir string, s *Server, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pod resources: %w", err)
	}
	path := filepath.Join(dir, SocketName)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("pod resources: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("pod resources: %w", err)
	}
	limiter := rate.NewLimiter(DefaultQPS, DefaultBurst)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !limiter.Allow() {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return h(ctx, req)
	}))
	api.RegisterPodResourcesListerServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil {
			log.Error("pod resources server ended", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Stop()
		<-done
	}()
	return nil
}
