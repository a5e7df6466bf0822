package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeDriver is a CSI node plugin and its registrar, each a gRPC server on
// a unix socket: what node-driver-registrar and a driver's node plugin
// serve. It records the calls; NodePublishVolume creates the target
// directory (as drivers do) but mounts nothing.
type fakeDriver struct {
	csipb.UnimplementedNodeServer
	registerapi.UnimplementedRegistrationServer

	name, endpoint string
	typ            string
	versions       []string
	nodeID         string
	topology       map[string]string
	maxVolumes     int64
	caps           []csipb.NodeServiceCapability_RPC_Type

	mu         sync.Mutex
	calls      []string
	statuses   []*registerapi.RegistrationStatus
	stage      []*csipb.NodeStageVolumeRequest
	publish    []*csipb.NodePublishVolumeRequest
	unpub      []*csipb.NodeUnpublishVolumeRequest
	unstage    []*csipb.NodeUnstageVolumeRequest
	expand     []*csipb.NodeExpandVolumeRequest
	expandErr  error
	publishErr error // NodePublishVolume's answer when set
	stats      []*csipb.NodeGetVolumeStatsRequest
	usage      []*csipb.VolumeUsage // NodeGetVolumeStats's answer
	condition  *csipb.VolumeCondition
	infos      int
}

func newFakeDriver(name string) *fakeDriver {
	return &fakeDriver{
		name: name, typ: registerapi.CSIPlugin, versions: []string{"1.0.0"}, nodeID: "node-id-1",
		topology: map[string]string{"topology.fake.csi/node": "n1"}, maxVolumes: 7,
		caps: []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME},
	}
}

// serve starts the driver's endpoint in dir and its registrar socket in
// regDir; both stop with the test.
func (f *fakeDriver) serve(t *testing.T, dir, regDir string) (regSocket string) {
	t.Helper()
	f.endpoint = filepath.Join(dir, f.name+".sock")
	ds := grpc.NewServer()
	csipb.RegisterNodeServer(ds, f)
	listen(t, ds, f.endpoint)
	regSocket = filepath.Join(regDir, f.name+"-reg.sock")
	rs := grpc.NewServer()
	registerapi.RegisterRegistrationServer(rs, f)
	listen(t, rs, regSocket)
	return regSocket
}

func listen(t *testing.T, s *grpc.Server, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

func (f *fakeDriver) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeDriver) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeDriver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	f.record("GetInfo")
	f.mu.Lock()
	f.infos++
	f.mu.Unlock()
	return &registerapi.PluginInfo{Type: f.typ, Name: f.name, Endpoint: f.endpoint, SupportedVersions: f.versions}, nil
}

func (f *fakeDriver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	f.record("NotifyRegistrationStatus")
	f.mu.Lock()
	f.statuses = append(f.statuses, s)
	f.mu.Unlock()
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (f *fakeDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	f.record("NodeGetInfo")
	r := &csipb.NodeGetInfoResponse{NodeId: f.nodeID, MaxVolumesPerNode: f.maxVolumes}
	if f.topology != nil {
		r.AccessibleTopology = &csipb.Topology{Segments: f.topology}
	}
	return r, nil
}

func (f *fakeDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	f.record("NodeGetCapabilities")
	r := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range f.caps {
		r.Capabilities = append(r.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	return r, nil
}

func (f *fakeDriver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	f.record("NodeStageVolume")
	f.mu.Lock()
	f.stage = append(f.stage, r)
	f.mu.Unlock()
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (f *fakeDriver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	f.record("NodeUnstageVolume")
	f.mu.Lock()
	f.unstage = append(f.unstage, r)
	f.mu.Unlock()
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (f *fakeDriver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	f.record("NodePublishVolume")
	f.mu.Lock()
	f.publish = append(f.publish, r)
	err := f.publishErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if r.VolumeCapability.GetBlock() != nil {
		// A block volume's target is a file the driver puts the device
		// on (fakeBlock counts a file holding "device" as one).
		if err := os.WriteFile(r.TargetPath, []byte(fakeDeviceContent), 0o640); err != nil {
			return nil, err
		}
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (f *fakeDriver) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	f.record("NodeUnpublishVolume")
	f.mu.Lock()
	f.unpub = append(f.unpub, r)
	f.mu.Unlock()
	if err := os.RemoveAll(r.TargetPath); err != nil {
		return nil, err
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (f *fakeDriver) NodeExpandVolume(_ context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	f.record("NodeExpandVolume")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expand = append(f.expand, r)
	if f.expandErr != nil {
		return nil, f.expandErr
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: r.CapacityRange.GetRequiredBytes()}, nil
}

func (f *fakeDriver) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	f.record("NodeGetVolumeStats")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats = append(f.stats, r)
	return &csipb.NodeGetVolumeStatsResponse{Usage: f.usage, VolumeCondition: f.condition}, nil
}

// statusAtOnce plays the node status for m: every change of the volumes in
// use is written at once and succeeds (MarkVolumesReportedInUse with
// VolumesInUse), so the mount of an attachable volume does not wait.
func statusAtOnce(m *Mounter) *Mounter {
	m.InUseChanged = func() { m.MarkVolumesReportedInUse(m.VolumesInUse()) }
	return m
}
