package fleetsim

import (
	"fmt"
	"strings"

	"github.com/nodeagent/nodeagent/nodestatus"
)

// Images is what a simulated node's runtime reports: the first n of a
// typical worker's images (pause, kube-proxy, CNI, CSI, DNS, monitoring),
// then the workloads' images from a private registry, each with a digest
// reference and a tag as containerd lists them. 50 images make a Node of
// production size (10–20 kB stored; hack/fleet prints the size it produced).
func Images(n int) []nodestatus.Image {
	names := []string{"registry.k8s.io/pause:3.10", "registry.k8s.io/kube-proxy:v1.34.4", "docker.io/calico/node:v3.29.1",
		"docker.io/calico/cni:v3.29.1", "registry.k8s.io/coredns/coredns:v1.12.0", "quay.io/prometheus/node-exporter:v1.8.2",
		"registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.12.0", "docker.io/library/busybox:1.36",
		"registry.k8s.io/metrics-server/metrics-server:v0.7.2", "docker.io/fluent/fluent-bit:3.2.2"}
	var out []nodestatus.Image
	for i := 0; i < n; i++ {
		name := names[i%len(names)]
		if i >= len(names) {
			name = fmt.Sprintf("123456789012.dkr.ecr.eu-west-1.amazonaws.com/payments/service-%02d:v2.%d.%d-g%07x", i, i%7, i%13, i*104729)
		}
		repo, _, _ := strings.Cut(name, ":")
		digest := fmt.Sprintf("%s@sha256:%064x", repo, i+1)
		out = append(out, nodestatus.Image{ID: fmt.Sprintf("sha256:%064x", i+1), Names: []string{digest, name}, SizeBytes: int64(1+i) * 9_876_543})
	}
	return out
}
