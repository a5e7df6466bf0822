package localcluster

import "testing"

// A fleet's cluster takes thousands of nodes with a longer node mask; a mask
// kube-controller-manager would refuse is an error naming the field, before
// anything starts.
func TestNodeCIDRMaskSize(t *testing.T) {
	for _, tc := range []struct {
		mask     int
		wantErr  bool
		maxNodes int
	}{
		{mask: 0, maxNodes: 256}, // state files from before the field
		{mask: 24, maxNodes: 256},
		{mask: 29, maxNodes: 8192},
		{mask: 30, maxNodes: 16384},
		{mask: 16, wantErr: true},
		{mask: 8, wantErr: true},
		{mask: 31, wantErr: true},
	} {
		if tc.mask != 0 {
			err := checkNodeCIDRMaskSize(tc.mask)
			if (err != nil) != tc.wantErr {
				t.Errorf("checkNodeCIDRMaskSize(%d) = %v, want error %v", tc.mask, err, tc.wantErr)
			}
			if tc.wantErr {
				continue
			}
		}
		if got := (&State{NodeCIDRMaskSize: tc.mask}).MaxNodes(); got != tc.maxNodes {
			t.Errorf("MaxNodes with mask %d = %d, want %d", tc.mask, got, tc.maxNodes)
		}
	}
}

// A second cluster beside the first takes another /16; anything the mask
// checks cannot handle is refused by name before anything starts.
func TestClusterCIDR(t *testing.T) {
	for _, tc := range []struct {
		cidr, network string
		wantErr       bool
	}{
		{cidr: "", network: ClusterCIDR},
		{cidr: "10.246.0.0/16", network: "10.246.0.0/16"},
		{cidr: "10.246.0.0/24", wantErr: true},
		{cidr: "10.246.1.0/16", wantErr: true}, // host bits set
		{cidr: "fd00::/16", wantErr: true},
		{cidr: "nonsense", wantErr: true},
	} {
		err := checkClusterCIDR(tc.cidr)
		if (err != nil) != tc.wantErr {
			t.Errorf("checkClusterCIDR(%q) = %v, want error %v", tc.cidr, err, tc.wantErr)
		}
		if !tc.wantErr {
			if got := (&State{ClusterCIDR: tc.cidr}).PodNetwork(); got != tc.network {
				t.Errorf("PodNetwork with %q = %s, want %s", tc.cidr, got, tc.network)
			}
		}
	}
}
