package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kubelet's topology manager policies (topologyManagerPolicy) and scopes
// (topologyManagerScope).
const (
	TopologyManagerPolicyNone           = "none"
	TopologyManagerPolicyBestEffort     = "best-effort"
	TopologyManagerPolicyRestricted     = "restricted"
	TopologyManagerPolicySingleNumaNode = "single-numa-node"
	TopologyManagerScopeContainer       = "container"
	TopologyManagerScopePod             = "pod"
)

// Kubelet 1.34's topology manager policy options: prefer-closest-numa-nodes
// is GA, max-allowable-numa-nodes beta (TopologyManagerPolicyBetaOptions,
// on by default); there is no alpha option.
const (
	topologyOptionPreferClosest  = "prefer-closest-numa-nodes"
	topologyOptionMaxNUMANodes   = "max-allowable-numa-nodes"
	defaultMaxAllowableNUMANodes = 8
)

// SysNodeDir is where the NUMA nodes are read (node0, node1, ...), as
// kubelet's cadvisor reads the machine's topology; tests point it
// elsewhere.
var SysNodeDir = "/sys/devices/system/node"

// NUMANodes counts the nodeN directories under dir; a machine without
// the directory (a kernel without NUMA) has one node, as cadvisor reports.
func NUMANodes(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), "node"); ok {
			if _, err := strconv.Atoi(id); err == nil {
				n++
			}
		}
	}
	if n == 0 {
		return 1, nil
	}
	return n, nil
}

// validateTopologyManager checks the topology manager fields with
// kubelet's messages: a known policy and scope; with a policy other than
// none (kubelet ignores the options then), known options with valid
// values and their feature gates. nodeagent implements the policies on
// machines with one NUMA node only, where every resource is on node 0: on
// a machine with more, a policy other than none is refused by name.
func validateTopologyManager(c *NodeAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("topologyManagerPolicy")
	policies := []string{TopologyManagerPolicyNone, TopologyManagerPolicyBestEffort, TopologyManagerPolicyRestricted, TopologyManagerPolicySingleNumaNode}
	if !slices.Contains(policies, c.TopologyManagerPolicy) {
		errs = append(errs, field.Invalid(p, c.TopologyManagerPolicy,
			fmt.Sprintf("invalid configuration: topologyManagerPolicy (--topology-manager-policy) %q must be one of: %q", c.TopologyManagerPolicy, policies)))
	}
	sp := field.NewPath("topologyManagerScope")
	switch c.TopologyManagerScope {
	case TopologyManagerScopeContainer, TopologyManagerScopePod:
	default:
		errs = append(errs, field.Invalid(sp, c.TopologyManagerScope,
			fmt.Sprintf("invalid configuration: topologyManagerScope (--topology-manager-scope) %q must be one of: %q, or %q", c.TopologyManagerScope, TopologyManagerScopeContainer, TopologyManagerScopePod)))
	}
	op := field.NewPath("topologyManagerPolicyOptions")
	if len(c.TopologyManagerPolicyOptions) > 0 && !c.FeatureEnabled("TopologyManagerPolicyOptions") {
		errs = append(errs, field.Invalid(op, c.TopologyManagerPolicyOptions,
			fmt.Sprintf("topology manager policy options %v require feature gates %q enabled", c.TopologyManagerPolicyOptions, "TopologyManagerPolicyOptions")))
	}
	if c.TopologyManagerPolicy == TopologyManagerPolicyNone || len(errs) > 0 {
		return errs
	}
	for _, k := range slices.Sorted(maps.Keys(c.TopologyManagerPolicyOptions)) {
		v := c.TopologyManagerPolicyOptions[k]
		switch k {
		case topologyOptionPreferClosest:
			if _, err := strconv.ParseBool(v); err != nil {
				errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("bad value for option %q: %v", k, err)))
			}
		case topologyOptionMaxNUMANodes:
			if !c.FeatureEnabled("TopologyManagerPolicyBetaOptions") {
				errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("topology manager policy beta-level options not enabled, but option %q provided", k)))
				continue
			}
			n, err := strconv.Atoi(v)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("unable to convert policy option to integer %q: %v", k, err)))
			case n < defaultMaxAllowableNUMANodes:
				errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("the minimum value of %q should not be less than %v", k, defaultMaxAllowableNUMANodes)))
			}
		default:
			errs = append(errs, field.Invalid(op.Key(k), v, fmt.Sprintf("unknown Topology Manager Policy option: %q", k)))
		}
	}
	n, err := NUMANodes(SysNodeDir)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(p, c.TopologyManagerPolicy, fmt.Sprintf("cannot discover NUMA topology: %v", err)))
	case n > 1:
		errs = append(errs, field.Invalid(p, c.TopologyManagerPolicy,
			fmt.Sprintf("nodeagent implements the topology manager on machines with one NUMA node only, and this one has %d (%s); remove the field or set it to none", n, filepath.Join(SysNodeDir, "node*"))))
	}
	return errs
}
