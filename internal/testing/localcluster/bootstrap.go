package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Kubeadm's bootstrap token group and CSR bindings (kubeadm init phase
// bootstrap-token): tokens in NodeBootstrapGroup may create CSRs, their
// client CSRs are approved by kube-controller-manager's csrapproving
// controller, and so are nodes' renewals of their own certificates.
const NodeBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// bootstrapRBAC creates kubeadm's ClusterRoleBindings for TLS bootstrap
// and certificate rotation (existing ones are kept).
func (s *State) bootstrapRBAC(ctx context.Context) error {
	for _, b := range []struct{ name, role, group string }{
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", NodeBootstrapGroup},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NodeBootstrapGroup},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		if err := s.BindClusterRole(ctx, b.name, b.role, b.group); err != nil {
			return err
		}
	}
	return nil
}

// BindClusterRole binds role to group (a ClusterRoleBinding called name);
// an existing binding of that name is kept.
func (s *State) BindClusterRole(ctx context.Context, name, role, group string) error {
	return s.create(ctx, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}},
	})
}

// CreateBootstrapToken creates a bootstrap token Secret as kubeadm does
// (kube-system/bootstrap-token-<id>, usable for authentication, expiring
// after ttl) whose user is in groups (NodeBootstrapGroup when empty), and
// returns the token "<id>.<secret>".
func (s *State) CreateBootstrapToken(ctx context.Context, ttl time.Duration, groups ...string) (string, error) {
	if len(groups) == 0 {
		groups = []string{NodeBootstrapGroup}
	}
	id, secret := randomToken(6), randomToken(16)
	err := s.create(ctx, "/api/v1/namespaces/kube-system/secrets", map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "bootstrap-token-" + id, "namespace": "kube-system"},
		"type":     "bootstrap.kubernetes.io/token",
		"stringData": map[string]string{
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(ttl).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              strings.Join(groups, ","),
			"description":                    "localcluster bootstrap token",
		},
	})
	if err != nil {
		return "", err
	}
	return id + "." + secret, nil
}

// BootstrapKubeconfig writes a kubeconfig at path that authenticates with
// token, as kubeadm's bootstrap-kubelet.conf.
func (s *State) BootstrapKubeconfig(path, token string) error {
	ca, err := os.ReadFile(s.CACert)
	if err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: tls-bootstrap-token-user
  user:
    token: %s
contexts:
- name: tls-bootstrap-token-user@local
  context: {cluster: local, user: tls-bootstrap-token-user}
current-context: tls-bootstrap-token-user@local
`, s.APIServerURL, base64Std(ca), token)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// create POSTs obj to path as the admin; AlreadyExists is fine.
func (s *State) create(ctx context.Context, path string, obj any) error {
	err := s.send(ctx, http.MethodPost, path, obj)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusConflict {
		return nil
	}
	return err
}

// createOrReplace POSTs obj to dir as the admin and, if it exists, PUTs
// it to dir/name instead.
func (s *State) createOrReplace(ctx context.Context, dir, name string, obj any) error {
	err := s.send(ctx, http.MethodPost, dir, obj)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusConflict {
		return s.send(ctx, http.MethodPut, dir+"/"+name, obj)
	}
	return err
}

// statusError is an API server's answer other than 2xx.
type statusError struct {
	method, path, status, msg string
	code                      int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.method, e.path, e.status, e.msg)
}

func (s *State) send(ctx context.Context, method, path string, obj any) error {
	c, err := s.adminHTTPClient()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, s.APIServerURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return &statusError{method: method, path: path, status: resp.Status, code: resp.StatusCode, msg: strings.TrimSpace(string(msg))}
	}
	return nil
}

// randomToken is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
