package credprovider

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/pods/keyring"
)

const v1API = "credentialprovider.kubelet.k8s.io/v1"

// fakeProvider is a provider whose plugin is a function counting its runs.
func fakeProvider(clk *clocktesting.FakeClock, match []string, def time.Duration, answer func(image string) (*credentialproviderv1.CredentialProviderResponse, error)) (*provider, *atomic.Int32) {
	var runs atomic.Int32
	p := &provider{
		name: "fake", matchImages: match, defaultCache: def, apiVersion: v1API,
		clock: clk, cache: map[string]cacheEntry{}, lastPurge: clk.Now(), log: slog.New(slog.DiscardHandler),
	}
	p.run = func(_ context.Context, stdin []byte) ([]byte, error) {
		runs.Add(1)
		var req credentialproviderv1.CredentialProviderRequest
		if err := json.Unmarshal(stdin, &req); err != nil || req.Kind != "CredentialProviderRequest" || req.APIVersion != v1API {
			return nil, errors.New("bad request")
		}
		resp, err := answer(req.Image)
		if err != nil {
			return nil, err
		}
		resp.APIVersion, resp.Kind = v1API, "CredentialProviderResponse"
		return json.Marshal(resp)
	}
	return p, &runs
}

func answerWith(keyType credentialproviderv1.PluginCacheKeyType, dur *time.Duration, user string) func(string) (*credentialproviderv1.CredentialProviderResponse, error) {
	return func(image string) (*credentialproviderv1.CredentialProviderResponse, error) {
		r := &credentialproviderv1.CredentialProviderResponse{
			CacheKeyType: keyType,
			Auth:         map[string]credentialproviderv1.AuthConfig{"*.io": {Username: user, Password: "pw"}},
		}
		if dur != nil {
			r.CacheDuration = &metav1.Duration{Duration: *dur}
		}
		return r, nil
	}
}

func TestMatchImages(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p, runs := fakeProvider(clk, []string{"*.dkr.ecr.*.amazonaws.com", "gcr.io", "registry.io:8080/team", "*.azurecr.io"}, 0,
		answerWith(credentialproviderv1.ImagePluginCacheKeyType, nil, "u"))
	for image, want := range map[string]bool{
		"123456789.dkr.ecr.us-east-1.amazonaws.com/app": true,
		"dkr.ecr.us-east-1.amazonaws.com/app":           false, // one label short
		"gcr.io/project/app":                            true,
		"eu.gcr.io/project/app":                         false, // a glob covers one label
		"registry.io:8080/team/app":                     true,
		"registry.io:8080/other/app":                    false, // path prefix
		"registry.io/team/app":                          false, // port must match
		"myreg.azurecr.io/x":                            true,
		"docker.io/library/busybox":                     false,
	} {
		before := runs.Load()
		got := p.provide(image)
		if ran := runs.Load() > before; ran != want || (len(got) > 0) != want {
			t.Errorf("%s: plugin ran %v, credentials %v; want %v", image, ran, got, want)
		}
	}
}

// Cache keys and expiry with a fake clock: an answer is reused for the
// images its cacheKeyType covers until its duration passed.
func TestCache(t *testing.T) {
	sec := func(n int) *time.Duration { d := time.Duration(n) * time.Second; return &d }
	type lookup struct {
		after   time.Duration // since the previous lookup
		image   string
		wantRun bool
	}
	for _, tc := range []struct {
		desc    string
		keyType credentialproviderv1.PluginCacheKeyType
		dur     *time.Duration
		def     time.Duration
		lookups []lookup
	}{
		{"Image: cached per image", credentialproviderv1.ImagePluginCacheKeyType, sec(60), 0, []lookup{
			{0, "r.io/a", true}, {10 * time.Second, "r.io/a", false}, {0, "r.io/b", true}, {0, "r.io/b", false},
			{51 * time.Second, "r.io/a", true}, // 61s after its answer
		}},
		{"Registry: one answer for the registry's images", credentialproviderv1.RegistryPluginCacheKeyType, sec(60), 0, []lookup{
			{0, "r.io/a", true}, {0, "r.io/b", false}, {0, "s.io/a", true}, {60 * time.Second, "r.io/c", false}, {time.Second, "r.io/c", true},
		}},
		{"Global: one answer for every image", credentialproviderv1.GlobalPluginCacheKeyType, sec(30), 0, []lookup{
			{0, "r.io/a", true}, {0, "s.io/b", false}, {31 * time.Second, "t.io/c", true},
		}},
		{"no cacheDuration: defaultCacheDuration", credentialproviderv1.RegistryPluginCacheKeyType, nil, 5 * time.Minute, []lookup{
			{0, "r.io/a", true}, {4 * time.Minute, "r.io/b", false}, {61 * time.Second, "r.io/b", true},
		}},
		{"cacheDuration 0: not cached", credentialproviderv1.RegistryPluginCacheKeyType, sec(0), 5 * time.Minute, []lookup{
			{0, "r.io/a", true}, {0, "r.io/a", true},
		}},
		{"no cacheDuration and defaultCacheDuration 0: not cached", credentialproviderv1.ImagePluginCacheKeyType, nil, 0, []lookup{
			{0, "r.io/a", true}, {0, "r.io/a", true},
		}},
		{"invalid cacheKeyType: not used, not cached", "Bogus", sec(60), 0, []lookup{
			{0, "r.io/a", true}, {0, "r.io/a", true},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			p, runs := fakeProvider(clk, []string{"*.io"}, tc.def, answerWith(tc.keyType, tc.dur, "u"))
			for i, l := range tc.lookups {
				clk.Step(l.after)
				before := runs.Load()
				got := p.provide(l.image)
				if ran := runs.Load() > before; ran != l.wantRun {
					t.Fatalf("lookup %d (%s after %s): plugin ran %v, want %v", i, l.image, l.after, ran, l.wantRun)
				}
				if tc.keyType == "Bogus" {
					if len(got) != 0 {
						t.Fatalf("an answer with an invalid cacheKeyType was used: %v", got)
					}
				} else if got["*.io"].Username != "u" {
					t.Fatalf("lookup %d: credentials %v", i, got)
				}
			}
		})
	}
}

// Expired entries nobody asks for again are dropped within the purge
// interval.
func TestCachePurge(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := time.Minute
	p, _ := fakeProvider(clk, []string{"*.io"}, 0, answerWith(credentialproviderv1.ImagePluginCacheKeyType, &d, "u"))
	for _, img := range []string{"r.io/a", "r.io/b", "r.io/c"} {
		p.provide(img)
	}
	clk.Step(cachePurgeInterval + time.Second)
	p.provide("s.io/other")
	if len(p.cache) != 1 {
		t.Fatalf("cache after the purge interval: %d entries, want only the new one", len(p.cache))
	}
}

func TestFailingPluginGivesNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p, runs := fakeProvider(clk, []string{"*.io"}, time.Hour, func(string) (*credentialproviderv1.CredentialProviderResponse, error) {
		return nil, errors.New("boom")
	})
	if got := p.provide("r.io/a"); len(got) != 0 {
		t.Fatalf("credentials from a failed plugin: %v", got)
	}
	p.provide("r.io/a")
	if runs.Load() != 2 {
		t.Fatalf("a failure was cached: %d runs", runs.Load())
	}
	// A response of another apiVersion is refused.
	p.run = func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":"p"}}}`), nil
	}
	if got := p.provide("r.io/a"); len(got) != 0 {
		t.Fatalf("credentials from a response of another apiVersion: %v", got)
	}
}

// Several plugins: answers merged, earlier plugin first, most specific key
// first.
func TestPluginsLookupOrder(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	a, _ := fakeProvider(clk, []string{"r.io"}, 0, func(string) (*credentialproviderv1.CredentialProviderResponse, error) {
		return &credentialproviderv1.CredentialProviderResponse{CacheKeyType: "Image", Auth: map[string]credentialproviderv1.AuthConfig{
			"r.io": {Username: "a-registry"}, "r.io/team": {Username: "a-team"},
		}}, nil
	})
	a.name = "a"
	b, _ := fakeProvider(clk, []string{"*.io"}, 0, answerWith("Image", nil, "b-registry"))
	b.name = "b"
	ps := &Plugins{providers: []*provider{a, b}}
	var got []string
	for _, c := range ps.Lookup("r.io/team/app") {
		got = append(got, c.Username+" ("+c.Source+")")
	}
	want := []string{"a-team (credential provider a)", "a-registry (credential provider a)", "b-registry (credential provider b)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("lookup order (-want +got):\n%s", d)
	}
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr-credential-provider
  matchImages: ["*.dkr.ecr.*.amazonaws.com"]
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials]
  env: [{name: AWS_PROFILE, value: node}]
`)
	c, err := ReadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Providers[0]; p.DefaultCacheDuration.Duration != 12*time.Hour || p.Args[0] != "get-credentials" || p.Env[0].Value != "node" {
		t.Fatalf("decoded %+v", p)
	}
	// A directory: files merged in lexical order.
	write("d/20-b.json", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[{"name":"b","matchImages":["b.io"],"defaultCacheDuration":"1m","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1"}]}`)
	write("d/10-a.yml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- {name: a, matchImages: [a.io], defaultCacheDuration: 0s, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n")
	write("d/README", "not a config")
	c, err = ReadConfig(filepath.Join(dir, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 2 || c.Providers[0].Name != "a" || c.Providers[1].Name != "b" {
		t.Fatalf("merged providers %+v", c.Providers)
	}
	for _, tc := range []struct{ body, want string }{
		{`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: sa
  matchImages: ["*.io"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: true, cacheType: Token}
`, "providers[0].tokenAttributes: Forbidden: service account token mode (kubelet's KubeletServiceAccountTokenForCredentialProviders) is not supported"},
		{`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: a/b
  matchImages: []
  apiVersion: credentialprovider.kubelet.k8s.io/v2
`, "providers[0].name: Invalid value"},
		{`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- {name: x, matchImages: ["a.io"], apiVersion: credentialprovider.kubelet.k8s.io/v1}
`, "providers[0].defaultCacheDuration: Required value"},
		{`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- {name: x, matchImages: ["a.io"], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v2}
`, `providers[0].apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2"`},
		{`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers: []
`, "providers: Required value"},
		{`apiVersion: kubelet.config.k8s.io/v1
kind: KubeletConfiguration
`, `kind "KubeletConfiguration", want CredentialProviderConfig`},
	} {
		_, err := ReadConfig(write("bad.yaml", tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to contain %q", err, tc.want)
		}
	}
	dup := t.TempDir()
	for _, n := range []string{"1.yaml", "2.yaml"} {
		b, _ := os.ReadFile(good)
		if err := os.WriteFile(filepath.Join(dup, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadConfig(dup); err == nil || !strings.Contains(err.Error(), `duplicate provider name "ecr-credential-provider"`) {
		t.Errorf("duplicate across files: %v", err)
	}
}

var _ keyring.Provider = (*Plugins)(nil)
