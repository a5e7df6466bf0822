package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/pods/volume"
)

// ctxServiceAccountTokens is the volume context key of the tokens of a
// CSIDriver's tokenRequests (kubelet's csi_mounter.go).
const ctxServiceAccountTokens = "csi.storage.k8s.io/serviceAccount.tokens"

// TokenSource gives service account tokens bound to pods (*volume.Tokens,
// the cache projected volumes use too, as kubelet's token manager serves
// both).
type TokenSource interface {
	Get(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds *int64) (volume.Token, error)
}

// serviceAccountTokenAttrs is kubelet's podServiceAccountTokenAttrs: for
// a driver whose CSIDriver has tokenRequests (whatever its
// podInfoOnMount), one token of the pod's service account bound to the
// pod per request, with the request's audience and expirationSeconds (the
// API server's default, one hour, when unset), as the JSON object
// audience → {"token", "expirationTimestamp"} under
// csi.storage.k8s.io/serviceAccount.tokens. No CSIDriver or no
// tokenRequests: nothing. Any token that cannot be had fails the whole
// publish, with kubelet's message (its typo included).
func (m *Mounter) serviceAccountTokenAttrs(ctx context.Context, pod *v1.Pod, drv *storagev1.CSIDriver) (map[string]string, error) {
	if drv == nil || len(drv.Spec.TokenRequests) == 0 {
		return nil, nil
	}
	out := map[string]authenticationv1.TokenRequestStatus{}
	for _, tr := range drv.Spec.TokenRequests {
		var err error
		var tok volume.Token
		if m.Tokens == nil {
			err = errors.New("no API server to request service account tokens from")
		} else {
			tok, err = m.Tokens.Get(ctx, pod, tr.Audience, tr.ExpirationSeconds)
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get service accoount token attributes: %w", err)
		}
		out[tr.Audience] = authenticationv1.TokenRequestStatus{Token: tok.Token, ExpirationTimestamp: metav1.NewTime(tok.ExpiresAt)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return map[string]string{ctxServiceAccountTokens: string(b)}, nil
}

// requiresRepublish is the CSIDriver's requiresRepublish (kubelet's
// csiPlugin.RequiresRemount): NodePublishVolume again at each sync of a
// pod that has the volume published, so the driver can refresh what it
// put there (new tokens, rotated secrets).
func requiresRepublish(drv *storagev1.CSIDriver) bool {
	return drv != nil && drv.Spec.RequiresRepublish != nil && *drv.Spec.RequiresRepublish
}
