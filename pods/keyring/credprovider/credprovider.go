// Package credprovider runs kubelet's credential provider plugins: the
// executables a CredentialProviderConfig (kubelet.config.k8s.io/v1, also
// v1beta1 and v1alpha1) names, found in a bin directory, asked for an
// image's credentials with the credentialprovider.kubelet.k8s.io exec
// protocol (a CredentialProviderRequest on stdin, a
// CredentialProviderResponse on stdout), as kubelet's
// --image-credential-provider-config and --image-credential-provider-bin-dir
// configure them.
//
// Semantics are kubelet's (pkg/credentialprovider/plugin, v1.34): a plugin
// is run only for images one of its matchImages covers (keyring.Matches);
// its answer is cached under the image, its registry or one global key as
// its cacheKeyType says, for its cacheDuration (defaultCacheDuration when
// absent; 0: not cached); the cache is consulted by image, then registry,
// then global key; concurrent requests for one image run the plugin once;
// a plugin that fails, times out (1 minute) or answers badly gives no
// credentials (logged), so the pull goes on with the others. The answers
// of every matching plugin are merged, earlier plugins first, and looked
// up like a docker config (most specific key first).
//
// Service account token mode (tokenAttributes, kubelet's
// KubeletServiceAccountTokenForCredentialProviders) is not supported: a
// configuration that asks for it is refused by name at load.
package credprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/pods/keyring"
)

// configGroup is the API group of CredentialProviderConfig; kubelet reads
// its v1alpha1, v1beta1 and v1 versions, which have the same fields but
// tokenAttributes (v1 only).
const configGroup = "kubelet.config.k8s.io"

var configVersions = []string{configGroup + "/v1alpha1", configGroup + "/v1beta1", configGroup + "/v1"}

// pluginAPIVersions are the exec protocol versions a provider may ask for.
var pluginAPIVersions = []string{
	"credentialprovider.kubelet.k8s.io/v1alpha1",
	"credentialprovider.kubelet.k8s.io/v1beta1",
	credentialproviderv1.SchemeGroupVersion.String(),
}

// execTimeout bounds one run of a plugin (kubelet's catch-all minute).
const execTimeout = time.Minute

// cachePurgeInterval is how often expired answers are dropped even if no
// lookup hits them (kubelet's).
const cachePurgeInterval = 15 * time.Minute

// globalCacheKey is the key of an answer with cacheKeyType Global.
const globalCacheKey = "global"

// ReadConfig reads a CredentialProviderConfig from path, a file or a
// directory whose *.json, *.yaml and *.yml files are read in lexical order
// and merged (kubelet 1.34), and validates it. Every problem is reported,
// with its field path.
func ReadConfig(path string) (*kubeletconfigv1.CredentialProviderConfig, error) {
	if path == "" {
		return nil, errors.New("credential provider config path is empty")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("unable to access path %q: %w", path, err)
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("unable to read directory %q: %w", path, err)
		}
		files = nil
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".json", ".yaml", ".yml":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		slices.Sort(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("no configuration files found in directory %q", path)
		}
	}
	merged := &kubeletconfigv1.CredentialProviderConfig{}
	merged.APIVersion, merged.Kind = configGroup+"/v1", "CredentialProviderConfig"
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("unable to read file %q: %w", f, err)
		}
		var c kubeletconfigv1.CredentialProviderConfig
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("error decoding config %q: %w", f, err)
		}
		if c.Kind != "CredentialProviderConfig" {
			return nil, fmt.Errorf("error decoding config %q: kind %q, want CredentialProviderConfig", f, c.Kind)
		}
		if !slices.Contains(configVersions, c.APIVersion) {
			return nil, fmt.Errorf("error decoding config %q: apiVersion %q, want one of %s", f, c.APIVersion, strings.Join(configVersions, ", "))
		}
		for _, p := range c.Providers {
			if prev, dup := seen[p.Name]; dup {
				return nil, fmt.Errorf("duplicate provider name %q found in configuration files %s and %s", p.Name, prev, f)
			}
			seen[p.Name] = f
			merged.Providers = append(merged.Providers, p)
		}
	}
	if errs := validate(merged); len(errs) > 0 {
		return nil, fmt.Errorf("invalid credential provider config %s: %w", path, errs.ToAggregate())
	}
	return merged, nil
}

// validate checks what kubelet checks, and refuses what nodeagent does
// not implement.
func validate(c *kubeletconfigv1.CredentialProviderConfig) field.ErrorList {
	var errs field.ErrorList
	fp := field.NewPath("providers")
	if len(c.Providers) == 0 {
		errs = append(errs, field.Required(fp, "at least 1 item in plugins is required"))
	}
	names := map[string]bool{}
	for i, p := range c.Providers {
		pp := fp.Index(i)
		switch {
		case p.Name == "":
			errs = append(errs, field.Required(pp.Child("name"), ""))
		case strings.ContainsAny(p.Name, "/ "), p.Name == ".", p.Name == "..":
			errs = append(errs, field.Invalid(pp.Child("name"), p.Name, "provider name cannot contain '/' or spaces, nor be '.' or '..'"))
		case names[p.Name]:
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		names[p.Name] = true
		if p.APIVersion == "" {
			errs = append(errs, field.Required(pp.Child("apiVersion"), ""))
		} else if !slices.Contains(pluginAPIVersions, p.APIVersion) {
			errs = append(errs, field.NotSupported(pp.Child("apiVersion"), p.APIVersion, pluginAPIVersions))
		}
		if len(p.MatchImages) == 0 {
			errs = append(errs, field.Required(pp.Child("matchImages"), "at least 1 item in matchImages is required"))
		}
		for j, m := range p.MatchImages {
			if err := validMatchImage(m); err != nil {
				errs = append(errs, field.Invalid(pp.Child("matchImages").Index(j), m, "match image is invalid: "+err.Error()))
			}
		}
		if p.DefaultCacheDuration == nil {
			errs = append(errs, field.Required(pp.Child("defaultCacheDuration"), ""))
		} else if p.DefaultCacheDuration.Duration < 0 {
			errs = append(errs, field.Invalid(pp.Child("defaultCacheDuration"), p.DefaultCacheDuration.Duration.String(), "must be greater than or equal to 0"))
		}
		if p.TokenAttributes != nil {
			errs = append(errs, field.Forbidden(pp.Child("tokenAttributes"),
				"service account token mode (kubelet's KubeletServiceAccountTokenForCredentialProviders) is not supported by nodeagent"))
		}
	}
	return errs
}

// validMatchImage checks a matchImages entry as kubelet does: it must
// parse as the host and path of an https URL.
func validMatchImage(m string) error {
	_, err := url.Parse("https://" + m)
	return err
}

// Options configure Plugins.
type Options struct {
	// BinDir holds the plugin executables, each named as its provider.
	BinDir string
	// Clock drives cache expiry; default the real clock.
	Clock clock.PassiveClock
	// Logger receives plugin failures; default slog.Default().
	Logger *slog.Logger
	// Environ is the environment plugins inherit before their configured
	// env; default os.Environ.
	Environ func() []string
}

// Plugins are the configured credential provider plugins. Safe for
// concurrent use.
type Plugins struct {
	providers []*provider
	log       *slog.Logger
}

// Load reads the config at configPath and prepares its plugins from
// opts.BinDir. As kubelet, a bin directory or a plugin executable that
// does not exist fails the load.
func Load(configPath string, opts Options) (*Plugins, error) {
	cfg, err := ReadConfig(configPath)
	if err != nil {
		return nil, err
	}
	return New(cfg, opts)
}

// New prepares the plugins of a validated config.
func New(cfg *kubeletconfigv1.CredentialProviderConfig, opts Options) (*Plugins, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	if _, err := os.Stat(opts.BinDir); err != nil {
		return nil, fmt.Errorf("plugin binary directory %s: %w", opts.BinDir, err)
	}
	ps := &Plugins{log: opts.Logger}
	for _, c := range cfg.Providers {
		bin, err := exec.LookPath(filepath.Join(opts.BinDir, c.Name))
		if err != nil {
			return nil, fmt.Errorf("plugin binary executable %s: %w", filepath.Join(opts.BinDir, c.Name), err)
		}
		env := opts.Environ()
		for _, e := range c.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		p := &provider{
			name:         c.Name,
			matchImages:  c.MatchImages,
			defaultCache: c.DefaultCacheDuration.Duration,
			apiVersion:   c.APIVersion,
			clock:        opts.Clock,
			cache:        map[string]cacheEntry{},
			lastPurge:    opts.Clock.Now(),
			log:          opts.Logger.With("provider", c.Name),
		}
		args := slices.Clone(c.Args)
		p.run = func(ctx context.Context, stdin []byte) ([]byte, error) { return execPlugin(ctx, bin, args, env, stdin) }
		ps.providers = append(ps.providers, p)
	}
	return ps, nil
}

// Lookup returns the plugins' credentials for repo (an image's repository,
// "registry/path", as kubelet passes it), most specific key first.
func (ps *Plugins) Lookup(repo string) []keyring.Cred {
	if ps == nil {
		return nil
	}
	var ring keyring.Keyring
	for _, p := range ps.providers {
		if cfg := p.provide(repo); len(cfg) > 0 {
			ring.Add("credential provider "+p.name, cfg)
		}
	}
	return ring.Lookup(repo)
}

// provider is one plugin with its cache.
type provider struct {
	name         string
	matchImages  []string
	defaultCache time.Duration
	apiVersion   string
	clock        clock.PassiveClock
	log          *slog.Logger
	// run runs the plugin with a request and returns its stdout.
	run   func(ctx context.Context, stdin []byte) ([]byte, error)
	group singleflight.Group

	mu        sync.Mutex
	cache     map[string]cacheEntry
	lastPurge time.Time
}

type cacheEntry struct {
	config    keyring.Config
	expiresAt time.Time
}

// matches says whether the plugin handles image.
func (p *provider) matches(image string) bool {
	for _, m := range p.matchImages {
		if keyring.Matches(m, image) {
			return true
		}
	}
	return false
}

// registryOf is the registry part of an image (host[:port]).
func registryOf(image string) string {
	r, _, _ := strings.Cut(image, "/")
	return r
}

// cached returns the cached answer for image, by image, registry, then
// global key.
func (p *provider) cached(image string) (keyring.Config, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if now.Sub(p.lastPurge) > cachePurgeInterval {
		for k, e := range p.cache {
			if now.After(e.expiresAt) {
				delete(p.cache, k)
			}
		}
		p.lastPurge = now
	}
	for _, k := range []string{image, registryOf(image), globalCacheKey} {
		e, ok := p.cache[k]
		if !ok {
			continue
		}
		if now.After(e.expiresAt) {
			delete(p.cache, k)
			continue
		}
		return e.config, true
	}
	return nil, false
}

// provide returns the plugin's credentials for image: cached, else asked.
func (p *provider) provide(image string) keyring.Config {
	if !p.matches(image) {
		return nil
	}
	if cfg, ok := p.cached(image); ok {
		return cfg
	}
	v, err, _ := p.group.Do(image, func() (any, error) { return p.ask(image) })
	if err != nil {
		p.log.Warn("credential provider plugin gave no credentials", "image", image, "err", err)
		return nil
	}
	return v.(keyring.Config)
}

// ask runs the plugin for image and caches its answer as it says.
func (p *provider) ask(image string) (keyring.Config, error) {
	req, err := json.Marshal(credentialproviderv1.CredentialProviderRequest{
		TypeMeta: typeMeta(p.apiVersion, "CredentialProviderRequest"),
		Image:    image,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	out, err := p.run(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("error execing credential provider plugin %s for image %s: %w", p.name, image, err)
	}
	resp, err := p.decode(out)
	if err != nil {
		return nil, err
	}
	var key string
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType:
		key = image
	case credentialproviderv1.RegistryPluginCacheKeyType:
		key = registryOf(image)
	case credentialproviderv1.GlobalPluginCacheKeyType:
		key = globalCacheKey
	default:
		return nil, fmt.Errorf("credential provider plugin did not return a valid cacheKeyType: %q", resp.CacheKeyType)
	}
	cfg := keyring.Config{}
	for k, a := range resp.Auth {
		cfg[k] = keyring.Entry{Username: a.Username, Password: a.Password}
	}
	d := p.defaultCache
	if resp.CacheDuration != nil {
		d = resp.CacheDuration.Duration
	}
	if d > 0 {
		p.mu.Lock()
		p.cache[key] = cacheEntry{config: cfg, expiresAt: p.clock.Now().Add(d)}
		p.mu.Unlock()
	}
	return cfg, nil
}

// decode reads a plugin's answer: a CredentialProviderResponse of the
// provider's apiVersion. Decoding errors do not quote the answer (it may
// hold credentials).
func (p *provider) decode(out []byte) (*credentialproviderv1.CredentialProviderResponse, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(out, &tm); err != nil {
		return nil, errors.New("error decoding credential provider plugin response from stdout")
	}
	if tm.APIVersion != p.apiVersion {
		return nil, fmt.Errorf("apiVersion from credential plugin response did not match expected apiVersion:%s, actual apiVersion:%s", p.apiVersion, tm.APIVersion)
	}
	if tm.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Kind: %q", tm.Kind)
	}
	var resp credentialproviderv1.CredentialProviderResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, errors.New("error decoding credential provider plugin response from stdout")
	}
	return &resp, nil
}

// execPlugin runs bin with args and env, request on stdin, and returns its
// stdout; stderr is quoted in the error of a failed run.
func execPlugin(ctx context.Context, bin string, args, env []string, stdin []byte) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
