package network

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// EtcHostsPath is where a container sees the pod's hosts file.
const EtcHostsPath = "/etc/hosts"

// PodHostnameAndDomain returns a pod's hostname and its domain as kubelet
// computes them (GeneratePodHostNameAndDomain): spec.hostname or the pod
// name, cut to 63 characters; with spec.subdomain the domain is
// <subdomain>.<namespace>.svc.<clusterDomain>.
func PodHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > 63 {
		hostname = strings.TrimRight(hostname[:63], "-.")
		if hostname == "" {
			return "", "", fmt.Errorf("hostname for pod %q was invalid: %q", pod.Name, hostname)
		}
	}
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

// KernelHostname is the hostname set in the pod's UTS namespace: the
// hostname, or hostname.domain with spec.setHostnameAsFQDN (at most 64
// characters), as kubelet's GetNodenameForKernel. Host-network pods keep
// the node's hostname.
func KernelHostname(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > 64 {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, 64, len(fqdn))
	}
	return fqdn, nil
}

// HostsFile is the hosts file kubelet writes for a pod on the pod network
// (managedHostsFileContent): a header, the localhost entries, one line per
// pod IP with the FQDN (when the pod has a domain) and hostname, then the
// hostAliases.
func HostsFile(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasLines(aliases))
	return b.Bytes()
}

// HostNetworkHostsFile is the hosts file kubelet writes for a host-network
// pod: a header, the node's hosts file, then the hostAliases.
func HostNetworkHostsFile(nodeHosts []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (host network).\n")
	b.Write(nodeHosts)
	b.Write(hostAliasLines(aliases))
	return b.Bytes()
}

func hostAliasLines(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// ServiceEnv returns the service-link variables kubelet injects into a
// pod's containers (getServiceEnvVarMap and envvars.FromServices): for the
// master service (default/kubernetes) always, and with enableServiceLinks
// (nil means true, the API default) for every service of the pod's
// namespace that has a cluster IP. A service of the pod's namespace wins
// over the master service of the same name.
//
// Variables the container sets itself (env, envFrom) take precedence;
// MergeServiceEnv applies that rule.
func ServiceEnv(namespace string, enableServiceLinks *bool, services []*v1.Service) map[string]string {
	links := enableServiceLinks == nil || *enableServiceLinks
	chosen := map[string]*v1.Service{}
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		switch {
		case s.Namespace == "default" && s.Name == "kubernetes":
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		case s.Namespace == namespace && links:
			chosen[s.Name] = s
		}
	}
	env := map[string]string{}
	for _, s := range chosen {
		for k, v := range serviceVars(s) {
			env[k] = v
		}
	}
	return env
}

// serviceVars are one service's variables: {SVC}_SERVICE_HOST,
// {SVC}_SERVICE_PORT (first port) and _PORT_{NAME} (named ports), and the
// Docker link variables {SVC}_PORT, {SVC}_PORT_{port}_{PROTO}[_PROTO,
// _PORT, _ADDR].
func serviceVars(s *v1.Service) map[string]string {
	out := map[string]string{}
	if len(s.Spec.Ports) == 0 {
		return out
	}
	prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	out[prefix+"_SERVICE_HOST"] = ip
	out[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = strconv.Itoa(int(p.Port))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		port := strconv.Itoa(int(p.Port))
		url := strings.ToLower(proto) + "://" + joinHostPort(ip, port)
		if i == 0 {
			out[prefix+"_PORT"] = url
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out[pp] = url
		out[pp+"_PROTO"] = strings.ToLower(proto)
		out[pp+"_PORT"] = port
		out[pp+"_ADDR"] = ip
	}
	return out
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// MergeServiceEnv appends the service variables a container's own
// environment (NAME=value entries) does not set, sorted by name.
func MergeServiceEnv(env []string, service map[string]string) []string {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	keys := make([]string, 0, len(service))
	for k := range service {
		if !set[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := append([]string{}, env...)
	for _, k := range keys {
		out = append(out, k+"="+service[k])
	}
	return out
}

// Where a container sees the pod's name-service files (kubelet mounts the
// hosts file; containerd mounts resolv.conf and hostname from the sandbox).
const (
	EtcResolvConfPath = "/etc/resolv.conf"
	EtcHostnamePath   = "/etc/hostname"
)

// PodFiles are a pod's name-service files and UTS hostname.
type PodFiles struct {
	// ResolvConf, Hosts and Hostname are the contents of the files mounted
	// at /etc/resolv.conf, /etc/hosts and /etc/hostname.
	ResolvConf, Hosts, Hostname []byte
	// Hostname is nil for host-network pods: they see the node's hostname
	// (containerd writes os.Hostname() there).
	// UTSHostname is the hostname to set in the pod's UTS namespace; ""
	// for host-network pods, which share the node's.
	UTSHostname string
	// Events are kubelet's warnings (MissingClusterDNS, DNSConfigForming)
	// to record on the pod.
	Events []Event
}

// FilesForPod computes a pod's name-service files as kubelet (hosts file,
// hostname) and containerd (resolv.conf, hostname) write them. podIPs are
// status.podIPs; nodeHosts is the node's /etc/hosts (used for host-network
// pods). An error is a bad pod hostname/subdomain, an FQDN too long for
// setHostnameAsFQDN, or a malformed host resolv.conf: the pod cannot start.
func FilesForPod(pod *v1.Pod, podIPs []string, s DNSSettings, nodeHosts []byte) (PodFiles, error) {
	var f PodFiles
	dns, events, err := PodDNS(pod, s)
	if err != nil {
		return PodFiles{}, err
	}
	f.ResolvConf, f.Events = ResolvConfContent(dns), events
	hostname, domain, err := PodHostnameAndDomain(pod, s.ClusterDomain)
	if err != nil {
		return PodFiles{}, err
	}
	if pod.Spec.HostNetwork {
		f.Hosts = HostNetworkHostsFile(nodeHosts, pod.Spec.HostAliases)
		return f, nil
	}
	f.Hosts = HostsFile(podIPs, hostname, domain, pod.Spec.HostAliases)
	if f.UTSHostname, err = KernelHostname(hostname, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
		return PodFiles{}, err
	}
	f.Hostname = []byte(f.UTSHostname + "\n")
	return f, nil
}
