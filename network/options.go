package network

import (
	"fmt"
	"math"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The pod annotations that limit its bandwidth (kubelet's, read by
// containerd into the bandwidth capability).
const (
	IngressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
	EgressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
)

// OptionsForPod derives a pod's network options as kubelet and containerd
// do: the hostPorts of its (regular) containers and the bandwidth
// annotations. A bad annotation is an ErrInvalidOptions error.
func OptionsForPod(pod *v1.Pod) (Options, error) {
	var o Options
	for i := range pod.Spec.Containers {
		o.PortMappings = append(o.PortMappings, portMappings(&pod.Spec.Containers[i])...)
	}
	bw, err := BandwidthFromAnnotations(pod.Annotations)
	if err != nil {
		return Options{}, err
	}
	o.Bandwidth = bw
	return o, nil
}

// portMappings are a container's ports with a hostPort; a repeated port
// name (or, unnamed, the same family/protocol/hostIP/ports) counts once, as
// kubelet's MakePortMappings.
func portMappings(c *v1.Container) []PortMapping {
	var out []PortMapping
	seen := map[string]bool{}
	for _, p := range c.Ports {
		family := "any"
		if p.HostIP != "" {
			if ip := net.ParseIP(p.HostIP); ip != nil && ip.To4() == nil {
				family = "v6"
			} else {
				family = "v4"
			}
		}
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("%s-%s-%s:%d:%d", family, p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if p.HostPort <= 0 {
			continue
		}
		out = append(out, PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: string(p.Protocol), HostIP: p.HostIP})
	}
	return out
}

// BandwidthFromAnnotations reads kubernetes.io/ingress-bandwidth and
// kubernetes.io/egress-bandwidth (quantities in bits per second, between
// 1k and 1P as kubelet requires). nil when neither is set.
func BandwidthFromAnnotations(ann map[string]string) (*Bandwidth, error) {
	var bw Bandwidth
	set := false
	for _, a := range []struct {
		key string
		dst *int64
	}{{IngressBandwidthAnnotation, &bw.IngressRate}, {EgressBandwidthAnnotation, &bw.EgressRate}} {
		s, ok := ann[a.key]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("%w: annotation %s: %q: %w", ErrInvalidOptions, a.key, s, err)
		}
		if q.Cmp(resource.MustParse("1k")) < 0 {
			return nil, fmt.Errorf("%w: annotation %s: %q: resource is unreasonably small (< 1kbit)", ErrInvalidOptions, a.key, s)
		}
		if q.Cmp(resource.MustParse("1P")) > 0 {
			return nil, fmt.Errorf("%w: annotation %s: %q: resource is unreasonably large (> 1Pbit)", ErrInvalidOptions, a.key, s)
		}
		*a.dst = q.Value()
		set = true
	}
	if !set {
		return nil, nil
	}
	return &bw, nil
}

// cniPortMapping is the portMappings capability's element.
type cniPortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// cniBandwidth is the bandwidth capability (bits per second; containerd
// sets the burst to MaxUint32 bits).
type cniBandwidth struct {
	IngressRate  uint64 `json:"ingressRate,omitempty"`
	IngressBurst uint64 `json:"ingressBurst,omitempty"`
	EgressRate   uint64 `json:"egressRate,omitempty"`
	EgressBurst  uint64 `json:"egressBurst,omitempty"`
}

// cniIPRange is one range of the ipRanges capability.
type cniIPRange struct {
	Subnet string `json:"subnet"`
}

// capabilityArgs translates options into CNI capability arguments
// (libcni passes each only to plugins that declare the capability).
func capabilityArgs(o Options, podCIDRs []string) (map[string]any, error) {
	caps := map[string]any{}
	if len(o.PortMappings) > 0 {
		pms := make([]cniPortMapping, 0, len(o.PortMappings))
		for i, p := range o.PortMappings {
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			switch {
			case proto != "tcp" && proto != "udp" && proto != "sctp":
				return nil, fmt.Errorf("%w: portMappings[%d]: protocol %q is not TCP, UDP or SCTP", ErrInvalidOptions, i, p.Protocol)
			case p.HostPort <= 0 || p.HostPort > 65535 || p.ContainerPort <= 0 || p.ContainerPort > 65535:
				return nil, fmt.Errorf("%w: portMappings[%d]: ports must be between 1 and 65535 (hostPort %d, containerPort %d)", ErrInvalidOptions, i, p.HostPort, p.ContainerPort)
			case p.HostIP != "" && net.ParseIP(p.HostIP) == nil:
				return nil, fmt.Errorf("%w: portMappings[%d]: hostIP %q is not an IP address", ErrInvalidOptions, i, p.HostIP)
			}
			pms = append(pms, cniPortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP})
		}
		caps["portMappings"] = pms
	}
	if b := o.Bandwidth; b != nil && (b.IngressRate > 0 || b.EgressRate > 0) {
		if b.IngressRate < 0 || b.EgressRate < 0 {
			return nil, fmt.Errorf("%w: bandwidth must not be negative", ErrInvalidOptions)
		}
		var cb cniBandwidth
		if b.IngressRate > 0 {
			cb.IngressRate, cb.IngressBurst = uint64(b.IngressRate), math.MaxUint32
		}
		if b.EgressRate > 0 {
			cb.EgressRate, cb.EgressBurst = uint64(b.EgressRate), math.MaxUint32
		}
		caps["bandwidth"] = cb
	}
	if len(o.IPs) > 0 {
		ips := make([]string, 0, len(o.IPs))
		for _, ip := range o.IPs {
			if ip == nil || ip.IsUnspecified() {
				return nil, fmt.Errorf("%w: ips: %v is not a usable address", ErrInvalidOptions, ip)
			}
			ips = append(ips, ip.String())
		}
		caps["ips"] = ips
	}
	if len(podCIDRs) > 0 {
		var ranges [][]cniIPRange
		for _, c := range podCIDRs {
			if _, _, err := net.ParseCIDR(c); err != nil {
				continue
			}
			ranges = append(ranges, []cniIPRange{{Subnet: c}})
		}
		if len(ranges) > 0 {
			caps["ipRanges"] = ranges
		}
	}
	return caps, nil
}

// PodIPs orders a pod's addresses for status.podIPs as kubelet does: at
// most one per family, the node's primary family (that of nodeIP; IPv4
// when nodeIP is nil) first. status.podIP is the first.
func PodIPs(ips []net.IP, nodeIP net.IP) []string {
	v6first := nodeIP != nil && nodeIP.To4() == nil
	var first, second string
	for _, ip := range ips {
		is6 := ip.To4() == nil
		if is6 == v6first && first == "" {
			first = ip.String()
		}
		if is6 != v6first && second == "" {
			second = ip.String()
		}
	}
	var out []string
	for _, s := range []string{first, second} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
