package network

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const localhostLines = `# Kubernetes-managed hosts file.
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
fe00::0	ip6-mcastprefix
fe00::1	ip6-allnodes
fe00::2	ip6-allrouters
`

func TestHostsFile(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		ips      []string
		hostname string
		domain   string
		aliases  []v1.HostAlias
		want     string
	}{
		{"hostname", []string{"123.45.67.89"}, "podFoo", "", nil, localhostLines + "123.45.67.89\tpodFoo\n"},
		{"with domain", []string{"203.0.113.1"}, "podFoo", "domainFoo", nil, localhostLines + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"},
		{"aliases", []string{"203.0.113.1"}, "podFoo", "domainFoo", []v1.HostAlias{
			{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}},
			{IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}},
		}, localhostLines + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
		{"dual stack", []string{"203.0.113.1", "fd00::6"}, "podFoo", "domainFoo", nil,
			localhostLines + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(HostsFile(tc.ips, tc.hostname, tc.domain, tc.aliases)); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	node := "127.0.0.1 localhost\n192.0.2.5 node1\n"
	got := string(HostNetworkHostsFile([]byte(node), []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"a"}}}))
	want := "# Kubernetes-managed hosts file (host network).\n" + node + "\n# Entries added by HostAliases.\n10.0.0.1\ta\n"
	if got != want {
		t.Fatalf("host network: got\n%s\nwant\n%s", got, want)
	}
}

func TestPodHostnameAndDomain(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b" // 64 characters; cut to 63, trailing '-' trimmed
	for _, tc := range []struct {
		desc                 string
		name, host, sub      string
		wantHost, wantDomain string
		wantErr              string
	}{
		{desc: "pod name", name: "web-0", wantHost: "web-0"},
		{desc: "spec.hostname", name: "web-0", host: "db", wantHost: "db"},
		{desc: "subdomain", name: "web-0", sub: "svc1", wantHost: "web-0", wantDomain: "svc1.ns1.svc.cluster.local"},
		{desc: "long name cut", name: long, wantHost: strings.Repeat("a", 62)},
		{desc: "bad hostname", name: "p", host: "Bad_Name", wantErr: `pod Hostname "Bad_Name" is not a valid DNS label`},
		{desc: "bad subdomain", name: "p", sub: "a.b", wantErr: `pod Subdomain "a.b" is not a valid DNS label`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "ns1"}, Spec: v1.PodSpec{Hostname: tc.host, Subdomain: tc.sub}}
			h, d, err := PodHostnameAndDomain(pod, "cluster.local")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || h != tc.wantHost || d != tc.wantDomain {
				t.Fatalf("got %q %q %v, want %q %q", h, d, err, tc.wantHost, tc.wantDomain)
			}
		})
	}
}

func TestKernelHostname(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		host, domain string
		fqdn         *bool
		want         string
		wantErr      bool
	}{
		{"web", "svc1.ns.svc.cluster.local", nil, "web", false},
		{"web", "svc1.ns.svc.cluster.local", &no, "web", false},
		{"web", "svc1.ns.svc.cluster.local", &yes, "web.svc1.ns.svc.cluster.local", false},
		{"web", "", &yes, "web", false},
		{strings.Repeat("a", 40), strings.Repeat("b", 24), &yes, "", true}, // 65 characters
		{strings.Repeat("a", 40), strings.Repeat("b", 23), &yes, strings.Repeat("a", 40) + "." + strings.Repeat("b", 23), false},
	} {
		got, err := KernelHostname(tc.host, tc.domain, tc.fqdn)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("KernelHostname(%q, %q, %v) = %q, %v; want %q (error %v)", tc.host, tc.domain, tc.fqdn, got, err, tc.want, tc.wantErr)
		}
	}
}

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	services := []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		svc("ns1", "my-db", "10.96.0.20", v1.ServicePort{Port: 5432}, v1.ServicePort{Name: "metrics-http", Port: 9187, Protocol: v1.ProtocolTCP}),
		svc("ns1", "dns", "10.96.0.10", v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}),
		svc("ns1", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		svc("ns2", "other", "10.96.0.30", v1.ServicePort{Port: 80}),
		svc("ns1", "v6", "fd00::10", v1.ServicePort{Port: 80}),
	}
	master := map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",
	}
	ns1 := map[string]string{
		"MY_DB_SERVICE_HOST":              "10.96.0.20",
		"MY_DB_SERVICE_PORT":              "5432",
		"MY_DB_SERVICE_PORT_METRICS_HTTP": "9187",
		"MY_DB_PORT":                      "tcp://10.96.0.20:5432",
		"MY_DB_PORT_5432_TCP":             "tcp://10.96.0.20:5432",
		"MY_DB_PORT_5432_TCP_PROTO":       "tcp",
		"MY_DB_PORT_5432_TCP_PORT":        "5432",
		"MY_DB_PORT_5432_TCP_ADDR":        "10.96.0.20",
		"MY_DB_PORT_9187_TCP":             "tcp://10.96.0.20:9187",
		"MY_DB_PORT_9187_TCP_PROTO":       "tcp",
		"MY_DB_PORT_9187_TCP_PORT":        "9187",
		"MY_DB_PORT_9187_TCP_ADDR":        "10.96.0.20",
		"DNS_SERVICE_HOST":                "10.96.0.10",
		"DNS_SERVICE_PORT":                "53",
		"DNS_SERVICE_PORT_DNS":            "53",
		"DNS_PORT":                        "udp://10.96.0.10:53",
		"DNS_PORT_53_UDP":                 "udp://10.96.0.10:53",
		"DNS_PORT_53_UDP_PROTO":           "udp",
		"DNS_PORT_53_UDP_PORT":            "53",
		"DNS_PORT_53_UDP_ADDR":            "10.96.0.10",
		"V6_SERVICE_HOST":                 "fd00::10",
		"V6_SERVICE_PORT":                 "80",
		"V6_PORT":                         "tcp://[fd00::10]:80",
		"V6_PORT_80_TCP":                  "tcp://[fd00::10]:80",
		"V6_PORT_80_TCP_PROTO":            "tcp",
		"V6_PORT_80_TCP_PORT":             "80",
		"V6_PORT_80_TCP_ADDR":             "fd00::10",
	}
	union := map[string]string{}
	for k, v := range master {
		union[k] = v
	}
	for k, v := range ns1 {
		union[k] = v
	}
	f := false
	for _, tc := range []struct {
		desc  string
		links *bool
		want  map[string]string
	}{
		{"links on (nil = true)", nil, union},
		{"links off: the master service only", &f, master},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ServiceEnv("ns1", tc.links, services); !reflect.DeepEqual(got, tc.want) {
				for k, v := range got {
					if tc.want[k] != v {
						t.Errorf("%s=%q, want %q", k, v, tc.want[k])
					}
				}
				for k := range tc.want {
					if _, ok := got[k]; !ok {
						t.Errorf("%s missing", k)
					}
				}
			}
		})
	}
	// A "kubernetes" service in the pod's namespace wins over the master.
	own := append(services, svc("ns1", "kubernetes", "10.96.0.99", v1.ServicePort{Port: 80}))
	if got := ServiceEnv("ns1", nil, own)["KUBERNETES_SERVICE_HOST"]; got != "10.96.0.99" {
		t.Fatalf("KUBERNETES_SERVICE_HOST = %q, want the namespace's service", got)
	}
	if got := MergeServiceEnv([]string{"DNS_SERVICE_HOST=mine", "A=1"}, map[string]string{"DNS_SERVICE_HOST": "10.96.0.10", "B_X": "2", "A_X": "3"}); !reflect.DeepEqual(got, []string{"DNS_SERVICE_HOST=mine", "A=1", "A_X=3", "B_X=2"}) {
		t.Fatalf("MergeServiceEnv = %q", got)
	}
}

func TestFilesForPod(t *testing.T) {
	yes := true
	s := DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: "/etc/resolv.conf",
		HostResolvConf: []byte("nameserver 198.51.100.1\nsearch corp.example\n")}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"},
		Spec: v1.PodSpec{Hostname: "web-0", Subdomain: "web", SetHostnameAsFQDN: &yes,
			HostAliases: []v1.HostAlias{{IP: "10.1.1.1", Hostnames: []string{"db"}}}},
	}
	f, err := FilesForPod(pod, []string{"10.244.1.5"}, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := PodFiles{
		ResolvConf:  []byte("search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"),
		Hosts:       []byte(localhostLines + "10.244.1.5\tweb-0.web.shop.svc.cluster.local\tweb-0\n\n# Entries added by HostAliases.\n10.1.1.1\tdb\n"),
		Hostname:    []byte("web-0.web.shop.svc.cluster.local\n"),
		UTSHostname: "web-0.web.shop.svc.cluster.local",
	}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got  %q\nwant %q", f, want)
	}

	host := pod.DeepCopy()
	host.Spec.HostNetwork = true
	f, err = FilesForPod(host, []string{"192.0.2.5"}, s, []byte("127.0.0.1 localhost\n"))
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Hosts) != "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.1.1\tdb\n" ||
		string(f.ResolvConf) != "search corp.example\nnameserver 198.51.100.1\n" || f.UTSHostname != "" || f.Hostname != nil {
		t.Fatalf("host network: %q", f)
	}

	bad := pod.DeepCopy()
	bad.Spec.Hostname = strings.Repeat("h", 60) // the FQDN exceeds 64 characters
	if _, err := FilesForPod(bad, nil, s, nil); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("long FQDN: %v", err)
	}
}
