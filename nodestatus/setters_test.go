package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeAddress(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{}
	if err := NodeAddress(func() (string, error) { return "10.0.0.5", nil }, "host-a")(ctx, node); err != nil {
		t.Fatal(err)
	}
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "host-a"}}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(want) {
		t.Errorf("got %v", node.Status.Addresses)
	}
	// A failing lookup keeps the reported addresses.
	if err := NodeAddress(func() (string, error) { return "", errors.New("no route") }, "host-a")(ctx, node); err == nil {
		t.Error("want error")
	}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(want) {
		t.Errorf("addresses dropped: %v", node.Status.Addresses)
	}
	// With nothing reported yet, at least the hostname.
	fresh := &v1.Node{}
	_ = NodeAddress(func() (string, error) { return "", errors.New("no route") }, "host-a")(ctx, fresh)
	if len(fresh.Status.Addresses) != 1 || fresh.Status.Addresses[0].Type != v1.NodeHostName {
		t.Errorf("got %v", fresh.Status.Addresses)
	}
}

func TestDaemonEndpoints(t *testing.T) {
	node := &v1.Node{}
	if err := DaemonEndpoints(10250)(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10250 {
		t.Fatalf("kubeletEndpoint port %d", p)
	}
}

func TestVolumesInUse(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{VolumesAttached: []v1.AttachedVolume{{Name: "kubernetes.io/csi/d^a", DevicePath: "x"}}}}
	in := []v1.UniqueVolumeName{"kubernetes.io/csi/d^a"}
	if err := VolumesInUse(nil, func() []v1.UniqueVolumeName { return in })(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if len(node.Status.VolumesInUse) != 1 || node.Status.VolumesInUse[0] != in[0] || len(node.Status.VolumesAttached) != 1 {
		t.Errorf("status %+v: want volumesInUse set, the controller's volumesAttached kept", node.Status)
	}

	// Before the volume reconstruction has run the list may be incomplete:
	// the field keeps what it had (an agent restarted with a volume mounted
	// must not drop it from the list the attach/detach controller reads).
	synced := false
	set := VolumesInUse(func() bool { return synced }, func() []v1.UniqueVolumeName { return nil })
	if err := set(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if len(node.Status.VolumesInUse) != 1 {
		t.Errorf("volumesInUse %v before the reconstruction, want the previous value kept", node.Status.VolumesInUse)
	}
	synced = true
	if err := set(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if len(node.Status.VolumesInUse) != 0 {
		t.Errorf("volumesInUse %v after the reconstruction, want the (empty) list", node.Status.VolumesInUse)
	}
}

func TestCapacitySetter(t *testing.T) {
	q := resource.MustParse
	ctx := context.Background()
	noEviction := func(v1.ResourceList) v1.ResourceList { return nil }
	node := &v1.Node{}
	node.Status.Capacity = v1.ResourceList{"hugepages-1Gi": q("0"), "example.com/gpu": q("2")}
	node.Status.Allocatable = v1.ResourceList{"hugepages-1Gi": q("0"), "example.com/gone": q("1")}
	measured := v1.ResourceList{v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110"),
		v1.ResourceEphemeralStorage: q("100Gi"), "hugepages-2Mi": q("0")}
	s := Capacity(func() (v1.ResourceList, error) { return measured, nil }, v1.ResourceList{v1.ResourceMemory: q("1Gi")}, noEviction)
	if err := s(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Status.Capacity["hugepages-1Gi"]; ok {
		t.Error("hugepage size no longer reported must be removed")
	}
	if _, ok := node.Status.Capacity["example.com/gpu"]; !ok {
		t.Error("extended resources set by others must be kept")
	}
	if _, ok := node.Status.Allocatable["example.com/gone"]; ok {
		t.Error("allocatable without capacity must be removed")
	}
	if m := node.Status.Allocatable[v1.ResourceMemory]; m.Cmp(q("7Gi")) != 0 {
		t.Errorf("allocatable memory %s", m.String())
	}
	// A failed measurement keeps the previous values.
	s = Capacity(func() (v1.ResourceList, error) {
		return v1.ResourceList{v1.ResourcePods: q("110")}, errors.New("meminfo: gone")
	}, nil, noEviction)
	if err := s(ctx, node); err == nil {
		t.Error("want error")
	}
	if m := node.Status.Capacity[v1.ResourceMemory]; m.Cmp(q("8Gi")) != 0 {
		t.Errorf("memory capacity lost on error: %s", m.String())
	}
}

func TestNodeInfoSetter(t *testing.T) {
	node := &v1.Node{}
	node.Status.NodeInfo.SystemUUID = "kept"
	node.Status.NodeInfo.KubeProxyVersion = "v1.0"
	err := NodeInfo(func(context.Context) (v1.NodeSystemInfo, error) {
		return v1.NodeSystemInfo{MachineID: "m", BootID: "b", KernelVersion: "k", OSImage: "o",
			ContainerRuntimeVersion: "containerd://1.7", KubeletVersion: "v0.1.0"}, errors.New("system uuid: permission denied")
	})(context.Background(), node)
	if err == nil {
		t.Error("want the error")
	}
	ni := node.Status.NodeInfo
	if ni.MachineID != "m" || ni.SystemUUID != "kept" || ni.BootID != "b" || ni.KernelVersion != "k" || ni.OSImage != "o" ||
		ni.ContainerRuntimeVersion != "containerd://1.7" || ni.KubeletVersion != "v0.1.0" || ni.KubeProxyVersion != "" ||
		ni.OperatingSystem != "linux" || ni.Architecture == "" || ni.Swap != nil {
		t.Errorf("got %+v", ni)
	}
	// The host's swap, as kubelet reports it (NodeSwap), kept once set.
	swap := int64(2 << 30)
	for _, in := range []*v1.NodeSwapStatus{{Capacity: &swap}, nil} {
		_ = NodeInfo(func(context.Context) (v1.NodeSystemInfo, error) {
			return v1.NodeSystemInfo{Swap: in}, nil
		})(context.Background(), node)
		if s := node.Status.NodeInfo.Swap; s == nil || s.Capacity == nil || *s.Capacity != swap {
			t.Errorf("nodeInfo.swap %+v, want capacity %d", s, swap)
		}
	}
}

func TestImageList(t *testing.T) {
	var images []Image
	for i := 0; i < 60; i++ {
		names := []string{}
		for j := 0; j < i%8; j++ {
			names = append(names, fmt.Sprintf("img%d:tag%d", i, j))
		}
		images = append(images, Image{ID: fmt.Sprintf("sha256:%02d", i), Names: names, SizeBytes: int64(i * 1000)})
	}
	got := ImageList(images, 50)
	if len(got) != 50 {
		t.Fatalf("got %d images, want 50", len(got))
	}
	for i, im := range got {
		if len(im.Names) == 0 || len(im.Names) > MaxNamesPerImage {
			t.Errorf("image %d has %d names", i, len(im.Names))
		}
		if i > 0 && got[i-1].SizeBytes < im.SizeBytes {
			t.Errorf("not largest first at %d", i)
		}
	}
	if got[0].SizeBytes != 59000 {
		t.Errorf("largest is %d", got[0].SizeBytes)
	}
	if n := len(ImageList(images, -1)); n != 52 { // 60 minus the 8 without names
		t.Errorf("unlimited: %d", n)
	}
	if ImageList(nil, 50) != nil {
		t.Error("empty list must be nil (omitted)")
	}
}

func TestImagesSetterKeepsLastList(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{}
	if err := Images(50, func(context.Context) ([]Image, bool, error) { return nil, false, errors.New("down") })(ctx, node); err == nil {
		t.Error("want error")
	}
	list := []Image{{ID: "a", Names: []string{"a:1"}, SizeBytes: 1}}
	_ = Images(50, func(context.Context) ([]Image, bool, error) { return list, true, nil })(ctx, node)
	if len(node.Status.Images) != 1 {
		t.Fatalf("got %v", node.Status.Images)
	}
	_ = Images(50, func(context.Context) ([]Image, bool, error) { return list, true, errors.New("stale") })(ctx, node)
	if len(node.Status.Images) != 1 {
		t.Errorf("last good list dropped: %v", node.Status.Images)
	}
}

func TestPressureConditionTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	pressure := false
	s := PressureCondition(v1.NodeMemoryPressure, func() time.Time { return now }, func() bool { return pressure })
	node := &v1.Node{}
	step := func(p bool) v1.NodeCondition {
		t.Helper()
		now = now.Add(10 * time.Second)
		pressure = p
		if err := s(context.Background(), node); err != nil {
			t.Fatal(err)
		}
		if len(node.Status.Conditions) != 1 {
			t.Fatalf("conditions: %v", node.Status.Conditions)
		}
		return node.Status.Conditions[0]
	}
	c := step(false)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletHasSufficientMemory" || c.Message != "kubelet has sufficient memory available" ||
		!c.LastTransitionTime.Time.Equal(now) || !c.LastHeartbeatTime.Time.Equal(now) {
		t.Errorf("initial: %+v", c)
	}
	first := now
	c = step(false)
	if !c.LastTransitionTime.Time.Equal(first) || !c.LastHeartbeatTime.Time.Equal(now) {
		t.Errorf("no flip must keep lastTransitionTime: %+v", c)
	}
	c = step(true)
	if c.Status != v1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" ||
		!c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("flip: %+v", c)
	}
	for cond, want := range map[v1.NodeConditionType]string{v1.NodeDiskPressure: "KubeletHasDiskPressure", v1.NodePIDPressure: "KubeletHasInsufficientPID"} {
		n := &v1.Node{}
		_ = PressureCondition(cond, func() time.Time { return now }, func() bool { return true })(context.Background(), n)
		if n.Status.Conditions[0].Reason != want {
			t.Errorf("%s: %+v", cond, n.Status.Conditions[0])
		}
	}
}

func TestReadyCondition(t *testing.T) {
	q := resource.MustParse
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi"), v1.ResourcePods: q("110"), v1.ResourceEphemeralStorage: q("1Gi")}
	for _, tc := range []struct {
		desc       string
		capacity   v1.ResourceList
		errs       []error
		wantStatus v1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"ready", full, nil, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
		{"runtime down", full, []error{errors.New("container runtime is down: dial unix: connection refused")}, v1.ConditionFalse,
			"KubeletNotReady", "container runtime is down: dial unix: connection refused"},
		{"missing capacity", v1.ResourceList{v1.ResourcePods: q("110")}, nil, v1.ConditionFalse, "KubeletNotReady",
			"missing node capacity for resources: cpu, memory, ephemeral-storage"},
		{"two causes", v1.ResourceList{}, []error{errors.New("PLEG is not healthy: x")}, v1.ConditionFalse, "KubeletNotReady",
			"[PLEG is not healthy: x, missing node capacity for resources: cpu, memory, pods, ephemeral-storage]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			node := &v1.Node{}
			node.Status.Capacity = tc.capacity
			_ = ReadyCondition(func() time.Time { return now }, func() []error { return tc.errs })(context.Background(), node)
			c := node.Status.Conditions[0]
			if c.Type != v1.NodeReady || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message != tc.wantMsg {
				t.Errorf("got %+v", c)
			}
			if !c.LastTransitionTime.Time.Equal(now) {
				t.Errorf("transition time %v", c.LastTransitionTime)
			}
		})
	}
}

func TestDevicePluginsSetter(t *testing.T) {
	q := resource.MustParse
	ctx := context.Background()
	noEviction := func(v1.ResourceList) v1.ResourceList { return nil }
	measured := v1.ResourceList{v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110")}
	node := &v1.Node{}
	capacity := Capacity(func() (v1.ResourceList, error) { return measured, nil }, nil, noEviction)
	var devCap, devAlloc v1.ResourceList
	var removed []string
	devices := DevicePlugins(func() (v1.ResourceList, v1.ResourceList, []string) { return devCap, devAlloc, removed })
	run := func() {
		t.Helper()
		for _, s := range []Setter{capacity, devices} {
			if err := s(ctx, node); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, wantCap, wantAlloc string) {
		t.Helper()
		c, a := node.Status.Capacity["example.com/dev"], node.Status.Allocatable["example.com/dev"]
		if c.Cmp(q(wantCap)) != 0 || a.Cmp(q(wantAlloc)) != 0 {
			t.Errorf("%s: capacity %s allocatable %s, want %s %s", what, c.String(), a.String(), wantCap, wantAlloc)
		}
	}
	devCap, devAlloc = v1.ResourceList{"example.com/dev": q("2")}, v1.ResourceList{"example.com/dev": q("2")}
	run()
	check("registered", "2", "2")
	devAlloc = v1.ResourceList{"example.com/dev": q("0")} // the plugin went away
	run()
	check("plugin gone", "2", "0")
	devCap, devAlloc, removed = v1.ResourceList{}, v1.ResourceList{}, []string{"example.com/dev"}
	run()
	check("removed", "0", "0")
	removed = nil // reported once; the zero stays
	run()
	check("after removal", "0", "0")
	if m := node.Status.Allocatable[v1.ResourceMemory]; m.Cmp(q("8Gi")) != 0 {
		t.Errorf("memory allocatable %s", m.String())
	}
}
