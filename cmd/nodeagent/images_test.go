package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// As kubelet, the agent does not start with a credential provider
// configuration it cannot use, and says why; kubelet's flags name it.
func TestStartRefusesUnusableCredentialProviders(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := write("kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	provider := func(extra string) string {
		return `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: missing-plugin
  matchImages: ["*.example.com"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
` + extra
	}
	token := write("token.yaml", provider("  tokenAttributes: {serviceAccountTokenAudience: a, requireServiceAccount: true, cacheType: Token}\n"))
	missing := write("missing.yaml", provider(""))
	cfg := write("config.yaml", `apiVersion: config.nodeagent.io/v1alpha1
kind: NodeAgentConfiguration
cniConfDir: ""
healthzPort: 0
port: 0
rootDir: `+filepath.Join(dir, "root")+`
`)
	for _, tc := range []struct {
		desc, providerConfig, want string
	}{
		{"service account token mode", token, "providers[0].tokenAttributes: Forbidden: service account token mode"},
		{"plugin not in the bin dir", missing, "plugin binary executable " + filepath.Join(bin, "missing-plugin")},
	} {
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runAgent([]string{"--config", cfg, "--kubeconfig", kubeconfig, "--hostname-override", "n1",
				"--image-credential-provider-config", tc.providerConfig, "--image-credential-provider-bin-dir", bin}, &stderr)
		}()
		select {
		case code := <-done:
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and %q", tc.desc, code, stderr.String(), tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the agent started", tc.desc)
		}
	}
}
