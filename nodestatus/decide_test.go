package nodestatus

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/nodeagent/internal/evictionapi"
)

func TestShouldReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc       string
		now, last  time.Time
		changed    bool
		freq, jitt time.Duration
		want       bool
	}{
		{"never reported", t0, time.Time{}, false, 5 * time.Minute, 0, true},
		{"changed", t0.Add(time.Second), t0, true, 5 * time.Minute, 0, true},
		{"unchanged, within period", t0.Add(4 * time.Minute), t0, false, 5 * time.Minute, 0, false},
		{"unchanged, period passed", t0.Add(5 * time.Minute), t0, false, 5 * time.Minute, 0, true},
		{"unchanged, positive jitter delays", t0.Add(5 * time.Minute), t0, false, 5 * time.Minute, time.Minute, false},
		{"unchanged, after positive jitter", t0.Add(6 * time.Minute), t0, false, 5 * time.Minute, time.Minute, true},
		{"unchanged, negative jitter advances", t0.Add(3 * time.Minute), t0, false, 5 * time.Minute, -2 * time.Minute, true},
		{"legacy 10s", t0.Add(10 * time.Second), t0, false, 10 * time.Second, 0, true},
		{"legacy 10s, too early", t0.Add(9 * time.Second), t0, false, 10 * time.Second, 0, false},
		// A jitter drawn for 5m after the frequency was lowered to 10s.
		{"stale positive jitter bounded by the new frequency", t0.Add(15 * time.Second), t0, false, 10 * time.Second, 2 * time.Minute, true},
		{"stale positive jitter, before the bound", t0.Add(14 * time.Second), t0, false, 10 * time.Second, 2 * time.Minute, false},
		{"stale negative jitter bounded", t0.Add(4 * time.Second), t0, false, 10 * time.Second, -2 * time.Minute, false},
		{"stale negative jitter, at the bound", t0.Add(5 * time.Second), t0, false, 10 * time.Second, -2 * time.Minute, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ShouldReport(tc.now, tc.last, tc.changed, tc.freq, tc.jitt); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReportJitter(t *testing.T) {
	f := 5 * time.Minute
	if got := ReportJitter(f, 0); got != -f/2 {
		t.Errorf("r=0: %v", got)
	}
	if got := ReportJitter(f, 0.5); got != 0 {
		t.Errorf("r=0.5: %v", got)
	}
	if got := ReportJitter(f, 0.999999); got >= f/2 || got < f/2-time.Second {
		t.Errorf("r→1: %v", got)
	}
}

func TestStatusChanged(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	base := func() *v1.NodeStatus {
		return &v1.NodeStatus{
			Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")},
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: t0, LastTransitionTime: t0},
				{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0},
			},
			Images: []v1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}},
		}
	}
	for _, tc := range []struct {
		desc   string
		mutate func(s *v1.NodeStatus)
		want   bool
	}{
		{"identical", func(s *v1.NodeStatus) {}, false},
		{"heartbeats only", func(s *v1.NodeStatus) {
			s.Conditions[0].LastHeartbeatTime = t1
			s.Conditions[1].LastHeartbeatTime = t1
		}, false},
		{"conditions reordered", func(s *v1.NodeStatus) { s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0] }, false},
		{"same quantity, other format", func(s *v1.NodeStatus) { s.Capacity[v1.ResourceCPU] = resource.MustParse("4000m") }, false},
		{"condition status", func(s *v1.NodeStatus) { s.Conditions[1].Status = v1.ConditionFalse }, true},
		{"condition message", func(s *v1.NodeStatus) { s.Conditions[1].Message = "x" }, true},
		{"transition time", func(s *v1.NodeStatus) { s.Conditions[1].LastTransitionTime = t1 }, true},
		{"condition added", func(s *v1.NodeStatus) {
			s.Conditions = append(s.Conditions, v1.NodeCondition{Type: v1.NodePIDPressure})
		}, true},
		{"image added", func(s *v1.NodeStatus) { s.Images = append(s.Images, v1.ContainerImage{Names: []string{"b"}}) }, true},
		{"capacity", func(s *v1.NodeStatus) { s.Capacity[v1.ResourceCPU] = resource.MustParse("8") }, true},
		{"address", func(s *v1.NodeStatus) { s.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "1.2.3.4"}} }, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			old, nw := base(), base()
			tc.mutate(nw)
			if got := StatusChanged(old, nw); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if !StatusChanged(nil, base()) || StatusChanged(nil, nil) {
		t.Error("nil handling")
	}
}

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		in      map[string]string
		want    int
		wantErr bool
	}{
		{"defaults", evictionapi.DefaultHard(), 5, false},
		{"0% and 100% disable", map[string]string{"memory.available": "0%", "nodefs.available": "100%"}, 0, false},
		{"pid", map[string]string{"pid.available": "1000"}, 1, false},
		{"unknown signal", map[string]string{"memory.free": "1Gi"}, 0, true},
		{"bad quantity", map[string]string{"memory.available": "lots"}, 0, true},
		{"zero quantity", map[string]string{"memory.available": "0"}, 0, true},
		{"negative percent", map[string]string{"memory.available": "-5%"}, 0, true},
		{"percent over 100", map[string]string{"memory.available": "150%"}, 0, true},
		{"bad percent", map[string]string{"memory.available": "x%"}, 0, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseThresholds(tc.in)
			if (err != nil) != tc.wantErr || len(got) != tc.want {
				t.Errorf("got %d thresholds, err %v; want %d, err=%v", len(got), err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestThresholdsMet(t *testing.T) {
	ts, err := parseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "pid.available": "10%"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		obs  map[string]observation
		want map[v1.NodeConditionType]bool
	}{
		{"all fine", map[string]observation{
			evictionapi.SignalMemoryAvailable: {available: 200 << 20, capacity: 1 << 30},
			evictionapi.SignalNodeFsAvailable: {available: 20, capacity: 100},
			evictionapi.SignalPIDAvailable:    {available: 50, capacity: 100},
		}, map[v1.NodeConditionType]bool{}},
		{"memory below quantity", map[string]observation{evictionapi.SignalMemoryAvailable: {available: 99 << 20, capacity: 1 << 30}},
			map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: true}},
		{"equal is not below", map[string]observation{evictionapi.SignalMemoryAvailable: {available: 100 << 20, capacity: 1 << 30}},
			map[v1.NodeConditionType]bool{}},
		{"disk below percent", map[string]observation{evictionapi.SignalNodeFsAvailable: {available: 9, capacity: 100}},
			map[v1.NodeConditionType]bool{v1.NodeDiskPressure: true}},
		{"pids", map[string]observation{evictionapi.SignalPIDAvailable: {available: 5, capacity: 100}},
			map[v1.NodeConditionType]bool{v1.NodePIDPressure: true}},
		{"no observation", map[string]observation{}, map[v1.NodeConditionType]bool{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := thresholdsMet(ts, tc.obs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k := range tc.want {
				if !got[k] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestPressureActive(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := 5 * time.Minute
	for _, tc := range []struct {
		desc      string
		now, last time.Time
		want      bool
	}{
		{"never crossed", t0, time.Time{}, false},
		{"crossing now", t0, t0, true},
		{"cleared 1m ago", t0.Add(time.Minute), t0, true},
		{"cleared just under the period", t0.Add(p - time.Nanosecond), t0, true},
		{"cleared a period ago", t0.Add(p), t0, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := PressureActive(tc.now, tc.last, p); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllocatable(t *testing.T) {
	q := resource.MustParse
	ts, _ := parseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"})
	capacity := v1.ResourceList{
		v1.ResourceCPU: q("4"), v1.ResourceMemory: q("8Gi"), v1.ResourcePods: q("110"),
		v1.ResourceEphemeralStorage: q("100Gi"), "hugepages-2Mi": q("1Gi"), "hugepages-1Gi": q("0"),
	}
	reserved := v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi"), "pid": q("100")}
	got := Allocatable(capacity, reserved, hardEvictionReservation(ts, capacity))
	want := v1.ResourceList{
		v1.ResourceCPU:              q("3500m"),
		v1.ResourceMemory:           q("6044Mi"), // 8Gi - 1Gi - 100Mi - 1Gi hugepages
		v1.ResourcePods:             q("110"),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(100<<30-int64(float64(100<<30)*0.1), resource.BinarySI),
		"hugepages-2Mi":             q("1Gi"),
		"hugepages-1Gi":             q("0"),
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, w := range want {
		if g := got[k]; g.Cmp(w) != 0 {
			t.Errorf("%s: got %s, want %s", k, g.String(), w.String())
		}
	}
	// Never negative.
	got = Allocatable(v1.ResourceList{v1.ResourceCPU: q("1")}, v1.ResourceList{v1.ResourceCPU: q("2")}, nil)
	if c := got[v1.ResourceCPU]; c.Sign() != 0 {
		t.Errorf("negative allocatable: %s", c.String())
	}
}

func TestStatusPatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	old := v1.NodeStatus{
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "fd00::1"},
			{Type: v1.NodeHostName, Address: "a"}},
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0}},
		Images:     []v1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}},
	}
	// Heartbeat only: the patch holds the heartbeat and nothing else.
	hb := *old.DeepCopy()
	hb.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute))
	p, err := StatusPatch(&old, &hb)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(p); !strings.Contains(s, "lastHeartbeatTime") || strings.Contains(s, "images") || strings.Contains(s, "addresses") ||
		strings.Contains(s, "metadata") || strings.Contains(s, "spec") {
		t.Errorf("heartbeat patch %s", s)
	}
	// A changed address list is replaced whole; applying the patch gives exactly the new list.
	nw := *old.DeepCopy()
	nw.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeHostName, Address: "a"}}
	p, err = StatusPatch(&old, &nw)
	if err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(v1.Node{Status: old})
	merged, err := strategicpatch.StrategicMergePatch(oldJSON, p, v1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var got v1.Node
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got.Status, nw) {
		t.Errorf("patch %s applied gives %+v, want %+v", p, got.Status.Addresses, nw.Addresses)
	}
}

// TestSignalConditionCoversEverySignal: every signal config accepts drives
// a condition here, and no other.
func TestSignalConditionCoversEverySignal(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(signalCondition)), evictionapi.Signals(); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("signals with a condition %v, want eviction.Signals() %v", got, want)
	}
}

// TestNilEvictionHardIsDefault: Options without EvictionHard get kubelet's
// defaults, the same map config.Default sets, imagefs.inodesFree included.
func TestNilEvictionHardIsDefault(t *testing.T) {
	o := Options{NodeName: "n", Nodes: fake.NewClientset().CoreV1().Nodes()}
	c, err := o.validate()
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseThresholds(evictionapi.DefaultHard())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.thresholds, want) {
		t.Errorf("thresholds %+v, want %+v", c.thresholds, want)
	}
	if !slices.ContainsFunc(c.thresholds, func(th threshold) bool { return th.signal == evictionapi.SignalImageFsInodesFree }) {
		t.Errorf("no imagefs.inodesFree threshold by default")
	}
}
