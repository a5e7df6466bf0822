// Package keyring finds the registry credentials for an image the way
// kubelet's credential provider does: from docker config files (the
// node's, see Node) and from a pod's image pull secrets (of type
// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg).
//
// A Keyring maps registry locations ("host[:port][/path]") to credentials.
// Lookup matches an image's repository against every location by host
// (each dot-separated label may be a glob: "*.example.com"), port and path
// prefix, and returns the credentials of every match, longest location
// first; with no match, an image of Docker Hub gets the credentials of
// "index.docker.io" (however the config spelled it). The caller tries them
// in turn. Nothing here talks to a registry.
package keyring

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Cred is one set of credentials and where it came from.
type Cred struct {
	Username string
	Password string
	// Source names where the credentials came from ("secret ns/name",
	// a file path), for logs; never the secret itself.
	Source string
	// Secret is the pod pull secret they came from (nil: the node's, a
	// plugin's), for KubeletEnsureSecretPulledImages.
	Secret *SecretRef
}

// SecretRef is a Secret's coordinates.
type SecretRef struct{ UID, Namespace, Name string }

// Entry is one registry's entry in a docker config: "auth" is
// base64(username:password) and wins over the separate fields.
type Entry struct {
	Username string
	Password string
}

// UnmarshalJSON reads username/password or auth.
func (e *Entry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password = raw.Username, raw.Password
	if raw.Auth == "" {
		return nil
	}
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(raw.Auth), "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(strings.TrimSpace(raw.Auth))
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return errors.New("auth: must be base64(username:password)")
	}
	e.Username, e.Password = user, pass
	return nil
}

// Config is a docker config's registries: the whole of a .dockercfg file,
// the "auths" of a config.json.
type Config map[string]Entry

// ParseConfigJSON reads a config.json (kubernetes.io/dockerconfigjson).
func ParseConfigJSON(b []byte) (Config, error) {
	var c struct {
		Auths Config `json:"auths"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return c.Auths, nil
}

// ParseDockercfg reads a .dockercfg (kubernetes.io/dockercfg).
func ParseDockercfg(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// FromSecret reads a pull secret: its type decides the key and format.
// Other types, or a secret without the key, yield nil and no error, as
// kubelet ignores them.
func FromSecret(s *v1.Secret) (Config, error) {
	switch {
	case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
		return ParseConfigJSON(s.Data[v1.DockerConfigJsonKey])
	case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
		return ParseDockercfg(s.Data[v1.DockerConfigKey])
	}
	return nil, nil
}

// dockerHub is the key under which Docker Hub's credentials are found for
// an image of Docker Hub that matched no location.
const dockerHub = "index.docker.io"

// Keyring holds credentials by registry location. The zero value is empty
// and ready to use.
type Keyring struct {
	locs  []string // sorted longest (reverse lexical) first
	creds map[string][]Cred
}

// Add adds a config's entries, attributed to source.
func (k *Keyring) Add(source string, c Config) { k.add(source, nil, c) }

// AddSecret adds a pod pull secret's entries.
func (k *Keyring) AddSecret(source string, ref SecretRef, c Config) { k.add(source, &ref, c) }

func (k *Keyring) add(source string, ref *SecretRef, c Config) {
	if k.creds == nil {
		k.creds = map[string][]Cred{}
	}
	for loc, e := range c {
		key, ok := locationKey(loc)
		if !ok {
			continue
		}
		if _, seen := k.creds[key]; !seen {
			k.locs = append(k.locs, key)
		}
		k.creds[key] = append(k.creds[key], Cred{Username: e.Username, Password: e.Password, Source: source, Secret: ref})
	}
	// Reverse lexical order puts a longer path before its prefix
	// (kubelet's order, so the most specific credentials are tried first).
	slices.Sort(k.locs)
	slices.Reverse(k.locs)
}

// locationKey turns a config's key ("https://host:port/v1/", "host/path")
// into "host[:port][/path]".
func locationKey(loc string) (string, bool) {
	v := loc
	if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// Lookup returns the credentials for repo (an image's repository without
// tag or digest, as "registry/path", e.g. "docker.io/library/busybox"),
// most specific first.
func (k *Keyring) Lookup(repo string) []Cred {
	if k == nil {
		return nil
	}
	var out []Cred
	for _, loc := range k.locs {
		if matches(loc, repo) {
			out = append(out, k.creds[loc]...)
		}
	}
	if len(out) == 0 && isDockerHub(repo) {
		out = append(out, k.creds[dockerHub]...)
	}
	return out
}

// Matches says whether the location glob ("*.example.com:5000/path")
// covers repo ("registry/path" of an image): same number of host labels,
// each matching its glob, same port, and a path prefix. It is kubelet's
// matching of docker config keys, of credential provider plugins'
// matchImages and of the keys of their answers.
func Matches(glob, repo string) bool { return matches(glob, repo) }

func matches(glob, repo string) bool {
	g, err1 := url.Parse("https://" + glob)
	r, err2 := url.Parse("https://" + repo)
	if err1 != nil || err2 != nil {
		return false
	}
	gl, gp := splitHost(g.Host)
	rl, rp := splitHost(r.Host)
	if gp != rp || len(gl) != len(rl) || !strings.HasPrefix(r.Path, g.Path) {
		return false
	}
	for i := range gl {
		if ok, err := filepath.Match(gl[i], rl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDockerHub says whether repo is on Docker Hub: no registry part, or
// docker.io/index.docker.io, or a first part that is not a host name.
func isDockerHub(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !found {
		return true
	}
	if first == "docker.io" || first == dockerHub {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
