package network

import (
	"encoding/json"
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBandwidthFromAnnotations(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		ann     map[string]string
		want    *Bandwidth
		wantErr string
	}{
		{desc: "none", ann: map[string]string{"other": "1M"}},
		{desc: "nil map"},
		{desc: "both", ann: map[string]string{IngressBandwidthAnnotation: "10M", EgressBandwidthAnnotation: "1Gi"},
			want: &Bandwidth{IngressRate: 10_000_000, EgressRate: 1 << 30}},
		{desc: "ingress only", ann: map[string]string{IngressBandwidthAnnotation: "1k"}, want: &Bandwidth{IngressRate: 1000}},
		{desc: "too small", ann: map[string]string{EgressBandwidthAnnotation: "999"}, wantErr: "annotation kubernetes.io/egress-bandwidth: \"999\": resource is unreasonably small (< 1kbit)"},
		{desc: "too large", ann: map[string]string{IngressBandwidthAnnotation: "2P"}, wantErr: "resource is unreasonably large (> 1Pbit)"},
		{desc: "not a quantity", ann: map[string]string{IngressBandwidthAnnotation: "fast"}, wantErr: "annotation kubernetes.io/ingress-bandwidth: \"fast\""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := BandwidthFromAnnotations(tc.ann)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalidOptions with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestOptionsForPod(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{EgressBandwidthAnnotation: "5M"}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{ContainerPort: 1, HostPort: 1}}}},
			Containers: []v1.Container{
				{Name: "web", Ports: []v1.ContainerPort{
					{Name: "http", ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP},
					{Name: "http", ContainerPort: 81, HostPort: 8081, Protocol: v1.ProtocolTCP}, // repeated name: once, as kubelet
					{ContainerPort: 9090, Protocol: v1.ProtocolTCP},                             // no hostPort
				}},
				{Name: "dns", Ports: []v1.ContainerPort{
					{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"},
					{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"}, // same unnamed: once
				}},
			},
		},
	}
	got, err := OptionsForPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		PortMappings: []PortMapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"},
			{HostPort: 5353, ContainerPort: 53, Protocol: "UDP", HostIP: "127.0.0.1"},
		},
		Bandwidth: &Bandwidth{EgressRate: 5_000_000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	pod.Annotations[IngressBandwidthAnnotation] = "x"
	if _, err := OptionsForPod(pod); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad annotation: %v", err)
	}
}

func TestCapabilityArgs(t *testing.T) {
	caps, err := capabilityArgs(Options{
		PortMappings: []PortMapping{{HostPort: 8080, ContainerPort: 80}, {HostPort: 53, ContainerPort: 53, Protocol: "UDP", HostIP: "10.0.0.1"}},
		Bandwidth:    &Bandwidth{IngressRate: 1000},
		IPs:          []net.IP{net.ParseIP("10.1.2.3")},
	}, []string{"10.244.3.0/24", "bad", "fd00::/64"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(caps)
	want := `{"bandwidth":{"ingressRate":1000,"ingressBurst":4294967295},"ipRanges":[[{"subnet":"10.244.3.0/24"}],[{"subnet":"fd00::/64"}]],"ips":["10.1.2.3"],"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"},{"hostPort":53,"containerPort":53,"protocol":"udp","hostIP":"10.0.0.1"}]}`
	if string(b) != want {
		t.Fatalf("capability args\n got %s\nwant %s", b, want)
	}
	if math.MaxUint32 != 4294967295 {
		t.Fatal("burst")
	}
	if caps, err := capabilityArgs(Options{}, nil); err != nil || len(caps) != 0 {
		t.Fatalf("no options: %v, %v", caps, err)
	}
	for _, o := range []Options{
		{PortMappings: []PortMapping{{HostPort: 0, ContainerPort: 80}}},
		{PortMappings: []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "ICMP"}}},
		{PortMappings: []PortMapping{{HostPort: 80, ContainerPort: 80, HostIP: "localhost"}}},
		{IPs: []net.IP{net.IPv4zero}},
	} {
		if _, err := capabilityArgs(o, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestPodIPs(t *testing.T) {
	v4a, v4b, v6a := net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2"), net.ParseIP("fd00::1")
	for _, tc := range []struct {
		desc   string
		ips    []net.IP
		nodeIP net.IP
		want   []string
	}{
		{"single", []net.IP{v4a}, nil, []string{"10.0.0.1"}},
		{"dual, v6 listed first, v4 node", []net.IP{v6a, v4a}, net.ParseIP("192.0.2.1"), []string{"10.0.0.1", "fd00::1"}},
		{"dual, v6 node", []net.IP{v4a, v6a}, net.ParseIP("2001:db8::1"), []string{"fd00::1", "10.0.0.1"}},
		{"one per family", []net.IP{v4a, v4b, v6a}, nil, []string{"10.0.0.1", "fd00::1"}},
		{"v6 only on a v4 node", []net.IP{v6a}, net.ParseIP("192.0.2.1"), []string{"fd00::1"}},
		{"none", nil, nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := PodIPs(tc.ips, tc.nodeIP); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNotReadyError(t *testing.T) {
	var err error = &NotReadyError{Detail: "no network config found in /etc/cni/net.d"}
	if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrInvalidOptions) {
		t.Fatal("classification")
	}
	// kubelet's Ready condition message, verbatim (kubelet.go
	// updateRuntimeUp with containerd's NetworkReady condition).
	if err.Error() != "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized" {
		t.Fatalf("message %q", err.Error())
	}
}

func TestNewValidates(t *testing.T) {
	for _, c := range []Config{
		{CacheDir: "relative"},
		{CacheDir: "/x", ConfDir: "net.d"},
		{CacheDir: "/x", BinDirs: []string{"bin"}},
		{CacheDir: "/x", ResyncPeriod: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	n, err := New(Config{CacheDir: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if n.cfg.ConfDir != DefaultConfDir || !reflect.DeepEqual(n.cfg.BinDirs, DefaultBinDirs()) {
		t.Fatalf("defaults: %+v", n.cfg)
	}
	if err := n.Status(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Status before the first load: %v", err)
	}
}
