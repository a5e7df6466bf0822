package network

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kubelet's resolver limits (k8s.io/kubernetes/pkg/apis/core/validation).
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
)

// Event reasons kubelet uses for DNS problems of a pod.
const (
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonDNSConfigForming  = "DNSConfigForming"
)

// DNSSettings are the agent's DNS settings, kubelet's fields of the same
// names.
type DNSSettings struct {
	// ClusterDNS are the cluster DNS server addresses (clusterDNS).
	ClusterDNS []string
	// ClusterDomain is the cluster's domain (clusterDomain), "" for none.
	ClusterDomain string
	// ResolvConf is the path of the host resolver file (resolvConf); ""
	// means none, and then pods with the Default policy resolve through
	// the node itself (kubelet's behaviour).
	ResolvConf string
	// HostResolvConf is ResolvConf's content, read by the caller.
	HostResolvConf []byte
	// NodeIPs are the node's addresses (their families pick 127.0.0.1 or
	// ::1 when ResolvConf is "").
	NodeIPs []net.IP
}

// DNSConfig is a pod's resolver configuration.
type DNSConfig struct {
	Servers, Searches, Options []string
}

// Event is a warning kubelet records while forming a pod's configuration;
// the caller records it on the pod (type Warning).
type Event struct {
	Reason, Message string
}

// PodDNS computes a pod's resolver configuration as kubelet does
// (pkg/kubelet/network/dns: GetPodDNS): ClusterFirst (and
// ClusterFirstWithHostNet) use the cluster DNS servers, the cluster search
// domains before the host's and ndots:5; Default (and ClusterFirst on the
// host network, or without clusterDNS) uses the host's file; None starts
// empty; spec.dnsConfig is merged last; the limits of nameservers and
// search domains are applied with a DNSConfigForming event. The error is
// a malformed host resolv.conf.
func PodDNS(pod *v1.Pod, s DNSSettings) (DNSConfig, []Event, error) {
	var events []Event
	var cfg DNSConfig
	if s.ResolvConf != "" {
		servers, searches, options, err := parseResolvConf(s.HostResolvConf)
		if err != nil {
			return DNSConfig{}, nil, fmt.Errorf("encountered error while parsing resolv conf file %s: %w", s.ResolvConf, err)
		}
		cfg = DNSConfig{Servers: servers, Searches: searches, Options: options}
	}
	policy := pod.Spec.DNSPolicy
	cluster := false
	switch policy {
	case v1.DNSNone:
		cfg = DNSConfig{}
	case v1.DNSClusterFirstWithHostNet:
		cluster = true
	case v1.DNSDefault:
	case v1.DNSClusterFirst, "":
		cluster = !pod.Spec.HostNetwork
	default: // the API server rejects others; kubelet falls back to ClusterFirst
		cluster = true
	}
	if cluster && len(s.ClusterDNS) == 0 {
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
		events = append(events, Event{Reason: ReasonMissingClusterDNS, Message: fmt.Sprintf("pod: %q. %s", podString(pod), msg)})
		cluster = false
	}
	switch {
	case policy == v1.DNSNone:
	case cluster:
		cfg.Servers = append([]string(nil), s.ClusterDNS...)
		cfg.Searches = clusterSearches(cfg.Searches, pod.Namespace, s.ClusterDomain)
		cfg.Options = []string{"ndots:5"}
	case s.ResolvConf == "":
		// No host file: resolve through the node itself.
		for _, ip := range s.NodeIPs {
			if ip.To4() == nil {
				cfg.Servers = append(cfg.Servers, "::1")
			} else {
				cfg.Servers = append(cfg.Servers, "127.0.0.1")
			}
		}
		if len(cfg.Servers) == 0 {
			cfg.Servers = []string{"127.0.0.1"}
		}
		cfg.Searches = []string{"."}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > MaxDNSNameservers {
		cfg.Servers = cfg.Servers[:MaxDNSNameservers]
		events = append(events, Event{Reason: ReasonDNSConfigForming, Message: fmt.Sprintf(
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " "))})
	}
	if searches, cut := fitSearches(cfg.Searches); cut {
		cfg.Searches = searches
		events = append(events, Event{Reason: ReasonDNSConfigForming, Message: fmt.Sprintf(
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(searches, " "))})
	}
	return cfg, events, nil
}

// podString is kubelet's format.Pod: name_namespace(uid).
func podString(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

func clusterSearches(host []string, namespace, domain string) []string {
	if domain == "" {
		return host
	}
	return omitDuplicates(append([]string{namespace + ".svc." + domain, "svc." + domain, domain}, host...))
}

// fitSearches applies kubelet's search limits: at most 32 domains, none
// longer than 253 characters, at most 2048 characters in all (cut from the
// end).
func fitSearches(in []string) ([]string, bool) {
	cut := false
	s := append([]string(nil), in...)
	if len(s) > MaxDNSSearchPaths {
		s, cut = s[:MaxDNSSearchPaths], true
	}
	kept := s[:0]
	for _, d := range s {
		if len(d) > validation.DNS1123SubdomainMaxLength {
			cut = true
			continue
		}
		kept = append(kept, d)
	}
	s = kept
	if total := len(strings.Join(s, " ")); total > MaxDNSSearchListChars {
		for total > MaxDNSSearchListChars && len(s) > 0 {
			total -= len(s[len(s)-1]) + 1
			s = s[:len(s)-1]
		}
		cut = true
	}
	if !cut {
		return in, false
	}
	return s, true
}

func omitDuplicates(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// setOption sets an option ("name" or "name:value") in opts, replacing one
// of the same name where it is (kubelet merges through a map, so its order
// is random; here the first occurrence keeps its place).
func setOption(opts []string, o string) []string {
	name, _, _ := strings.Cut(o, ":")
	for i, old := range opts {
		if n, _, _ := strings.Cut(old, ":"); n == name {
			opts[i] = o
			return opts
		}
	}
	return append(opts, o)
}

// mergeOptions applies spec.dnsConfig.options over the base options.
func mergeOptions(base []string, extra []v1.PodDNSConfigOption) []string {
	out := append([]string{}, base...)
	for _, o := range extra {
		s := o.Name
		if o.Value != nil && *o.Value != "" {
			s += ":" + *o.Value
		}
		out = setOption(out, s)
	}
	return out
}

// parseResolvConf reads a resolv.conf as kubelet does: nameservers
// accumulate, the last search line wins (trailing dots trimmed, "."
// dropped), options accumulate with the last value of a name winning.
func parseResolvConf(b []byte) (servers, searches, options []string, err error) {
	servers, searches, options = []string{}, []string{}, []string{}
	var errs []error
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) >= 2 {
				servers = append(servers, f[1])
			} else {
				errs = append(errs, errors.New("nameserver list is empty "))
			}
		case "search":
			searches = []string{}
			for _, s := range f[1:] {
				if s != "." {
					searches = append(searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			for _, o := range f[1:] {
				options = setOption(options, o)
			}
		}
	}
	return servers, searches, options, errors.Join(errs...)
}

// ResolvConfContent renders a resolver configuration as containerd writes
// a sandbox's resolv.conf: search, nameserver lines, options.
func ResolvConfContent(c DNSConfig) []byte {
	var b bytes.Buffer
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return b.Bytes()
}
