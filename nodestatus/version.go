package nodestatus

import "strings"

// KubernetesVersion is the Kubernetes release whose kubelet behaviour
// nodeagent implements (node status, pod lifecycle, node API), pinned with
// the upstream conformance specs it is tested against
// (hack/controlplane/go.mod).
const KubernetesVersion = "v1.34.4"

// KubeletVersion is what nodeagent reports as nodeInfo.kubeletVersion.
// Controllers' version-skew checks, `kubectl get nodes` and the e2e
// framework read that field as a Kubernetes version, so it is
// KubernetesVersion, with nodeagent's own version as semver build metadata
// (ignored when versions are compared): "v1.34.4+nodeagent.1.2.0".
func KubeletVersion(agentVersion string) string {
	meta := sanitizeBuildMeta(strings.TrimPrefix(agentVersion, "v"))
	if meta == "" {
		return KubernetesVersion
	}
	return KubernetesVersion + "+nodeagent." + meta
}

// sanitizeBuildMeta turns s into dot-separated semver build identifiers
// ([0-9A-Za-z-]+): other characters become '-', empty identifiers are
// dropped.
func sanitizeBuildMeta(s string) string {
	var ids []string
	for _, id := range strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '+' }) {
		id = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
				return r
			}
			return '-'
		}, id)
		if id != "" {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, ".")
}
