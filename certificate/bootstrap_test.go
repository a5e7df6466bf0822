package certificate

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/pki"
)

func kubeconfig(server string, ca, cert, key []byte, token string) string {
	b := base64.StdEncoding.EncodeToString
	user := fmt.Sprintf("client-certificate-data: %s\n    client-key-data: %s", b(cert), b(key))
	if token != "" {
		user = "token: " + token
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: u
  user:
    %s
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, server, b(ca), user)
}

// When the kubeconfig is used as it is, and when it is replaced from the
// bootstrap kubeconfig (kubelet's LoadClientConfig rules).
func TestLoadClientConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue("system:node:a", []string{"system:nodes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	boot := filepath.Join(dir, "bootstrap.conf")
	if err := os.WriteFile(boot, []byte(kubeconfig("https://boot.example:6443", caPEM, nil, nil, "abcdef.0123456789abcdef")), 0o600); err != nil {
		t.Fatal(err)
	}
	valid := kubeconfig("https://node.example:6443", caPEM, cert, key, "")
	store := NewFileStore(filepath.Join(dir, "pki"), "kubelet-client")
	for _, tc := range []struct {
		desc       string
		kubeconfig string // "" means missing
		bootstrap  string
		now        time.Time
		wantBoot   bool
		wantHost   string
		wantErr    bool
	}{
		{desc: "no bootstrap kubeconfig: the kubeconfig as it is", kubeconfig: valid, now: now, wantHost: "https://node.example:6443"},
		{desc: "no bootstrap kubeconfig, no kubeconfig: an error", now: now, wantErr: true},
		{desc: "valid kubeconfig: the bootstrap kubeconfig is ignored", kubeconfig: valid, bootstrap: boot, now: now, wantHost: "https://node.example:6443"},
		{desc: "missing kubeconfig: bootstrap", bootstrap: boot, now: now, wantBoot: true, wantHost: "https://boot.example:6443"},
		{desc: "expired certificate: bootstrap", kubeconfig: valid, bootstrap: boot, now: now.Add(20 * 365 * 24 * time.Hour), wantBoot: true, wantHost: "https://boot.example:6443"},
		{desc: "kubeconfig without a certificate: bootstrap", kubeconfig: kubeconfig("https://node.example:6443", caPEM, nil, nil, "tok"), bootstrap: boot, now: now, wantBoot: true, wantHost: "https://boot.example:6443"},
		{desc: "garbage kubeconfig: bootstrap", kubeconfig: "not: [a kubeconfig", bootstrap: boot, now: now, wantBoot: true, wantHost: "https://boot.example:6443"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			kc := filepath.Join(t.TempDir(), "kubelet.conf")
			if tc.kubeconfig != "" {
				if err := os.WriteFile(kc, []byte(tc.kubeconfig), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadClientConfig(kc, tc.bootstrap, store, tc.now)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Bootstrapping != tc.wantBoot || got.User.Host != tc.wantHost {
				t.Fatalf("bootstrapping %v host %s, want %v %s", got.Bootstrapping, got.User.Host, tc.wantBoot, tc.wantHost)
			}
			if len(got.User.CertData)+len(got.User.CertFile)+len(got.User.BearerToken) != 0 {
				t.Error("the user config carries credentials; the manager's certificate must be the only one")
			}
			if !tc.wantBoot {
				if got.Initial == nil || !got.Embedded {
					t.Errorf("initial certificate %v embedded %v", got.Initial != nil, got.Embedded)
				}
				return
			}
			if got.Bootstrap.BearerToken != "abcdef.0123456789abcdef" {
				t.Error("the bootstrap credentials are not the bootstrap kubeconfig's")
			}
			b, err := os.ReadFile(kc)
			if err != nil || !strings.Contains(string(b), store.CurrentPath()) || !strings.Contains(string(b), "https://boot.example:6443") {
				t.Errorf("kubeconfig not rewritten to name %s: %v\n%s", store.CurrentPath(), err, b)
			}
		})
	}
}
