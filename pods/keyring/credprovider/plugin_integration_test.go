package credprovider_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/keyring/credprovider"
	"github.com/nodeagent/nodeagent/runtime"
)

// buildPlugin builds testdata/testplugin into a fresh bin directory under
// the name given.
func buildPlugin(t *testing.T, name string) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./testdata/testplugin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	return bin
}

// A real plugin executable, configured as kubelet configures it, gives the
// credentials a registry with basic auth wants; the pull through the real
// containerd succeeds with them and fails without. The plugin runs once
// for several lookups (its Registry-keyed answer is cached), gets its args
// and env, and a plugin that is not in the bin directory fails the load.
func TestPluginCredentialsPull(t *testing.T) {
	reg, err := testimage.NewRegistry(map[string]string{"robot": "from-plugin"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	bin := buildPlugin(t, "test-credential-provider")
	logFile := filepath.Join(t.TempDir(), "requests.log")
	cfgFile := filepath.Join(t.TempDir(), "credential-provider-config.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-credential-provider
  matchImages: [%q]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials, --verbose]
  env:
  - {name: TEST_PLUGIN_USER, value: robot}
  - {name: TEST_PLUGIN_PASSWORD, value: from-plugin}
  - {name: TEST_PLUGIN_LOG, value: %q}
`, reg.Host, logFile)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	plugins, err := credprovider.Load(cfgFile, credprovider.Options{BinDir: bin, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	node := &keyring.Node{Plugins: plugins, Clock: fakeNow{}}
	repo := reg.Host + "/private/busybox"
	creds := node.Lookup(repo)
	if len(creds) != 1 || creds[0].Username != "robot" || creds[0].Password != "from-plugin" {
		t.Fatalf("credentials %+v", creds)
	}
	if c := node.Lookup(reg.Host + "/other/image"); len(c) != 1 {
		t.Fatalf("second image of the registry: %+v", c)
	}
	if c := node.Lookup("docker.io/library/busybox"); len(c) != 0 {
		t.Fatalf("an image the plugin does not match got %+v", c)
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(log)), repo+" get-credentials --verbose"; got != want {
		t.Fatalf("plugin requests:\n%s\nwant exactly one: %s", got, want)
	}

	cd := testimage.StartContainerd(t)
	rt, err := runtime.New(runtime.Options{Address: cd.Address, CgroupParent: cd.CgroupParent, Namespace: "credprovider",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := repo + ":v1"
	if _, err := rt.PullImage(ctx, ref); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("anonymous pull: %v, want a 401", err)
	}
	img, err := rt.PullImageWithAuth(ctx, ref, &runtime.RegistryAuth{Username: creds[0].Username, Password: creds[0].Password})
	if err != nil {
		t.Fatalf("pull with the plugin's credentials: %v", err)
	}
	t.Logf("pulled %s (%s) with credentials from %s", ref, img.ID, creds[0].Source)

	// The bin directory must hold every configured plugin.
	if _, err := credprovider.Load(cfgFile, credprovider.Options{BinDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "test-credential-provider") {
		t.Fatalf("load with a bin dir without the plugin: %v", err)
	}
	if _, err := credprovider.Load(cfgFile, credprovider.Options{BinDir: "/nonexistent"}); err == nil {
		t.Fatal("load with a missing bin dir succeeded")
	}
}

type fakeNow struct{}

func (fakeNow) Now() time.Time                  { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
func (fakeNow) Since(t time.Time) time.Duration { return fakeNow{}.Now().Sub(t) }
