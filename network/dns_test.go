package network

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseResolvConf(t *testing.T) {
	for _, tc := range []struct {
		in                         string
		servers, searches, options []string
		wantErr                    bool
	}{
		{in: ""},
		{in: " \n\t\n"},
		{in: "#comment\n #comment"},
		{in: "#comment\nnameserver", wantErr: true},
		{in: "nameserver 1.2.3.4\nsearch", servers: []string{"1.2.3.4"}},
		{in: "\tnameserver \t 1.2.3.4 #comment", servers: []string{"1.2.3.4"}},
		{in: "nameserver 1.2.3.4\nnameserver 5.6.7.8", servers: []string{"1.2.3.4", "5.6.7.8"}},
		{in: "search .", searches: nil},
		{in: "search . foo", searches: []string{"foo"}},
		{in: "search foo .  bar", searches: []string{"foo", "bar"}},
		{in: "search foo. bar", searches: []string{"foo", "bar"}},
		{in: "search foo\nsearch bar", searches: []string{"bar"}},
		{in: "domain example.com\nsearch foo", searches: []string{"foo"}},
		{in: "options ndots:1 ndots:5 attempts:2", options: []string{"ndots:5", "attempts:2"}},
		{in: "options ndots:1 edns0 attempts:2 single-request-reopen", options: []string{"ndots:1", "edns0", "attempts:2", "single-request-reopen"}},
		{in: "options ndots:1 timeout:3 timeout:1 attempts:3\noptions ndots:5", options: []string{"ndots:5", "timeout:1", "attempts:3"}},
		{in: "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4",
			servers: []string{"1.2.3.4", "5.6.7.8"}, searches: []string{"bar"}, options: []string{"ndots:5", "attempts:4"}},
	} {
		t.Run(strings.ReplaceAll(tc.in, "\n", `\n`), func(t *testing.T) {
			s, se, o, err := parseResolvConf([]byte(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			norm := func(x []string) []string {
				if len(x) == 0 {
					return nil
				}
				return x
			}
			if !reflect.DeepEqual(norm(s), tc.servers) || !reflect.DeepEqual(norm(se), tc.searches) || !reflect.DeepEqual(norm(o), tc.options) {
				t.Fatalf("got %q %q %q, want %q %q %q", s, se, o, tc.servers, tc.searches, tc.options)
			}
		})
	}
}

func TestPodDNS(t *testing.T) {
	ndots3 := "3"
	hostConf := []byte("nameserver 198.51.100.1\nnameserver 198.51.100.2\nsearch host.example corp.example\noptions timeout:2 edns0\n")
	podDNSConfig := &v1.PodDNSConfig{
		Nameservers: []string{"10.0.0.11"},
		Searches:    []string{"my.domain"},
		Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots3}, {Name: "debug"}},
	}
	cluster := DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: "/etc/resolv.conf", HostResolvConf: hostConf}
	clusterSearch := []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	hostSearch := []string{"host.example", "corp.example"}
	for _, tc := range []struct {
		desc        string
		policy      v1.DNSPolicy
		hostNetwork bool
		dnsConfig   *v1.PodDNSConfig
		settings    DNSSettings
		want        DNSConfig
		events      []string
	}{
		{desc: "ClusterFirst", policy: v1.DNSClusterFirst, settings: cluster,
			want: DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(clusterSearch, hostSearch...), Options: []string{"ndots:5"}}},
		{desc: "empty policy is ClusterFirst", settings: cluster,
			want: DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(clusterSearch, hostSearch...), Options: []string{"ndots:5"}}},
		{desc: "ClusterFirst on the host network falls back to Default", policy: v1.DNSClusterFirst, hostNetwork: true, settings: cluster,
			want: DNSConfig{Servers: []string{"198.51.100.1", "198.51.100.2"}, Searches: hostSearch, Options: []string{"timeout:2", "edns0"}}},
		{desc: "ClusterFirstWithHostNet", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, settings: cluster,
			want: DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(clusterSearch, hostSearch...), Options: []string{"ndots:5"}}},
		{desc: "Default", policy: v1.DNSDefault, settings: cluster,
			want: DNSConfig{Servers: []string{"198.51.100.1", "198.51.100.2"}, Searches: hostSearch, Options: []string{"timeout:2", "edns0"}}},
		{desc: "None", policy: v1.DNSNone, settings: cluster, want: DNSConfig{}},
		{desc: "None with dnsConfig", policy: v1.DNSNone, settings: cluster, dnsConfig: &v1.PodDNSConfig{
			Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"},
			Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots3}, {Name: "debug"}}},
			want: DNSConfig{Servers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"}, Options: []string{"ndots:3", "debug"}}},
		{desc: "ClusterFirst with dnsConfig", policy: v1.DNSClusterFirst, settings: cluster, dnsConfig: podDNSConfig,
			want: DNSConfig{Servers: []string{"10.96.0.10", "10.0.0.11"}, Searches: append(append(clusterSearch, hostSearch...), "my.domain"), Options: []string{"ndots:3", "debug"}}},
		{desc: "Default with dnsConfig", policy: v1.DNSDefault, settings: cluster, dnsConfig: podDNSConfig,
			want: DNSConfig{Servers: []string{"198.51.100.1", "198.51.100.2", "10.0.0.11"}, Searches: append(hostSearch, "my.domain"), Options: []string{"timeout:2", "edns0", "ndots:3", "debug"}}},
		{desc: "no clusterDomain: host searches only", policy: v1.DNSClusterFirst,
			settings: DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ResolvConf: "/etc/resolv.conf", HostResolvConf: hostConf},
			want:     DNSConfig{Servers: []string{"10.96.0.10"}, Searches: hostSearch, Options: []string{"ndots:5"}}},
		{desc: "no clusterDNS: Default with an event", policy: v1.DNSClusterFirst,
			settings: DNSSettings{ClusterDomain: "cluster.local", ResolvConf: "/etc/resolv.conf", HostResolvConf: hostConf},
			want:     DNSConfig{Servers: []string{"198.51.100.1", "198.51.100.2"}, Searches: hostSearch, Options: []string{"timeout:2", "edns0"}},
			events:   []string{`MissingClusterDNS: pod: "web_ns1(uid-1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`}},
		{desc: "resolvConf empty: the node resolves", policy: v1.DNSDefault,
			settings: DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeIPs: []net.IP{net.ParseIP("192.0.2.5"), net.ParseIP("2001:db8::5")}},
			want:     DNSConfig{Servers: []string{"127.0.0.1", "::1"}, Searches: []string{"."}}},
		{desc: "resolvConf empty, no node IPs", policy: v1.DNSDefault, settings: DNSSettings{},
			want: DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{desc: "resolvConf empty, ClusterFirst", policy: v1.DNSClusterFirst, settings: DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"},
			want: DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{desc: "duplicates merge", policy: v1.DNSClusterFirst, settings: cluster,
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"cluster.local", "x.example"}},
			want:      DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append(clusterSearch, hostSearch...), "x.example"), Options: []string{"ndots:5"}}},
		{desc: "more than 3 nameservers", policy: v1.DNSDefault, settings: cluster,
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2"}},
			want:      DNSConfig{Servers: []string{"198.51.100.1", "198.51.100.2", "10.0.0.1"}, Searches: hostSearch, Options: []string{"timeout:2", "edns0"}},
			events:    []string{"DNSConfigForming: Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 198.51.100.1 198.51.100.2 10.0.0.1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "uid-1"},
				Spec:       v1.PodSpec{DNSPolicy: tc.policy, HostNetwork: tc.hostNetwork, DNSConfig: tc.dnsConfig},
			}
			got, events, err := PodDNS(pod, tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			norm := func(c DNSConfig) DNSConfig {
				for _, p := range []*[]string{&c.Servers, &c.Searches, &c.Options} {
					if len(*p) == 0 {
						*p = nil
					}
				}
				return c
			}
			if !reflect.DeepEqual(norm(got), norm(tc.want)) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			var evs []string
			for _, e := range events {
				evs = append(evs, e.Reason+": "+e.Message)
			}
			if !slices.Equal(evs, tc.events) {
				t.Fatalf("events %q, want %q", evs, tc.events)
			}
		})
	}
}

func TestPodDNSBadHostFile(t *testing.T) {
	_, _, err := PodDNS(&v1.Pod{}, DNSSettings{ResolvConf: "/etc/resolv.conf", HostResolvConf: []byte("nameserver\n")})
	if err == nil || !strings.Contains(err.Error(), "/etc/resolv.conf") {
		t.Fatalf("err = %v", err)
	}
}

func TestSearchLimits(t *testing.T) {
	long := strings.Repeat("a", 254) // longer than a DNS subdomain
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example", i))
	}
	var wide []string // 2048+ characters in all
	for i := range 30 {
		wide = append(wide, fmt.Sprintf("%02d", i)+strings.Repeat("x", 98))
	}
	for _, tc := range []struct {
		desc    string
		in      []string
		want    []string
		wantCut bool
	}{
		{"within limits", []string{"a.example", "b.example"}, []string{"a.example", "b.example"}, false},
		{"too many: the first 32", many, many[:32], true},
		{"a domain longer than 253 characters is dropped", []string{"a.example", long, "b.example"}, []string{"a.example", "b.example"}, true},
		{"too long in all: cut from the end", wide, wide[:20], true}, // 20*100+19 = 2019 <= 2048 < 21*100+20
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, cut := fitSearches(tc.in)
			if !slices.Equal(got, tc.want) || cut != tc.wantCut {
				t.Fatalf("got %d domains (cut %v), want %d (cut %v)", len(got), cut, len(tc.want), tc.wantCut)
			}
		})
	}
	// Through PodDNS: the event carries the applied line.
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{DNSPolicy: v1.DNSNone, DNSConfig: &v1.PodDNSConfig{Searches: many}}}
	got, events, err := PodDNS(pod, DNSSettings{})
	if err != nil || len(got.Searches) != 32 || len(events) != 1 || events[0].Reason != ReasonDNSConfigForming ||
		events[0].Message != "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(many[:32], " ") {
		t.Fatalf("got %d searches, events %+v, err %v", len(got.Searches), events, err)
	}
}

func TestResolvConfContent(t *testing.T) {
	for _, tc := range []struct {
		in   DNSConfig
		want string
	}{
		{DNSConfig{}, ""},
		{DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}},
			"search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{DNSConfig{Servers: []string{"127.0.0.1", "::1"}, Searches: []string{"."}}, "search .\nnameserver 127.0.0.1\nnameserver ::1\n"},
	} {
		if got := string(ResolvConfContent(tc.in)); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.in, got, tc.want)
		}
	}
}
