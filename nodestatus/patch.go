package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// StatusPatch returns the strategic merge patch that turns old's status into
// new's: only the status, only the changed fields. status.addresses is
// declared a merge list keyed by type, which cannot express two addresses of
// one type or a removed one, so a changed address list is sent whole with a
// replace directive (as k8s.io/component-helpers/node/util does).
func StatusPatch(old, new *v1.NodeStatus) ([]byte, error) {
	replaceAddresses := len(old.Addresses) > 0 && !apiequality.Semantic.DeepEqual(old.Addresses, new.Addresses)
	target := *new // shallow copy; only Addresses is replaced
	if replaceAddresses {
		target.Addresses = old.Addresses
	}
	oldJSON, err := json.Marshal(v1.Node{Status: *old})
	if err != nil {
		return nil, fmt.Errorf("encoding old status: %w", err)
	}
	newJSON, err := json.Marshal(v1.Node{Status: target})
	if err != nil {
		return nil, fmt.Errorf("encoding new status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("computing status patch: %w", err)
	}
	if !replaceAddresses {
		return patch, nil
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	status, _ := p["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		p["status"] = status
	}
	addrs := make([]any, 0, len(new.Addresses)+1)
	for _, a := range new.Addresses {
		addrs = append(addrs, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	status["addresses"] = append(addrs, map[string]any{"$patch": "replace"})
	return json.Marshal(p)
}

// patchStatus sends StatusPatch(old, new) to the status subresource of node
// name, bounded by ctx.
func patchStatus(ctx context.Context, c NodeClient, name string, old, new *v1.Node) (*v1.Node, []byte, error) {
	patch, err := StatusPatch(&old.Status, &new.Status)
	if err != nil {
		return nil, nil, err
	}
	updated, err := c.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, patch, fmt.Errorf("patching status of node %s: %w", name, err)
	}
	return updated, patch, nil
}
