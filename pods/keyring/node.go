package keyring

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// nodeRefresh is how long the node's credentials are used before the files
// are read again (kubelet caches its docker config provider for 5m).
const nodeRefresh = 5 * time.Minute

// NodePaths returns the files the node's credentials are read from, in
// kubelet's order: config.json in rootDir (kubelet's --root-dir), in
// $HOME/.docker and in /.docker; then the legacy .dockercfg in rootDir, $HOME
// and /. The first file that exists and parses is used, alone. (Kubelet also
// searches its working directory; a systemd service's is /, already
// searched, so nodeagent leaves it out.)
func NodePaths(rootDir, home string) []string {
	var out []string
	for _, d := range []string{rootDir, filepath.Join(home, ".docker"), "/.docker"} {
		out = append(out, filepath.Join(d, "config.json"))
	}
	for _, d := range []string{rootDir, home, "/"} {
		out = append(out, filepath.Join(d, ".dockercfg"))
	}
	// Without a home directory, or with home or rootDir "/", some paths
	// are relative or repeated: keep each absolute path once.
	seen := map[string]bool{}
	uniq := out[:0]
	for _, p := range out {
		if filepath.IsAbs(p) && !seen[p] {
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	return uniq
}

// Node is the node's keyring, read from the first usable of Paths and
// re-read at most every 5 minutes. Safe for concurrent use.
type Node struct {
	Paths []string
	Clock clock.PassiveClock
	Log   *slog.Logger
	// Plugins are the credential provider plugins (nil: none); their
	// credentials come after the files' (kubelet's union of its node
	// keyring and its external credential provider keyring).
	Plugins Provider

	mu      sync.Mutex
	ring    *Keyring
	expires time.Time
}

// Provider gives credentials for an image's repository, most specific
// first (credprovider.Plugins implements it).
type Provider interface {
	Lookup(repo string) []Cred
}

// Lookup returns the node's credentials for repo: the docker config
// file's, then the plugins'.
func (n *Node) Lookup(repo string) []Cred {
	out := n.Keyring().Lookup(repo)
	if n.Plugins != nil {
		out = append(out, n.Plugins.Lookup(repo)...)
	}
	return out
}

// Keyring returns the node's credentials (an empty keyring when no file
// has any).
func (n *Node) Keyring() *Keyring {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Clock.Now()
	if n.ring != nil && now.Before(n.expires) {
		return n.ring
	}
	n.ring, n.expires = n.read(), now.Add(nodeRefresh)
	return n.ring
}

func (n *Node) read() *Keyring {
	k := &Keyring{}
	for _, p := range n.Paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var c Config
		if err == nil {
			if filepath.Base(p) == ".dockercfg" {
				c, err = ParseDockercfg(b)
			} else {
				c, err = ParseConfigJSON(b)
			}
		}
		if err != nil {
			if n.Log != nil {
				n.Log.Warn("ignoring unusable registry credentials file", "path", p, "err", err)
			}
			continue
		}
		k.Add(p, c)
		if n.Log != nil {
			n.Log.Info("read node registry credentials", "path", p, "registries", len(c))
		}
		return k
	}
	return k
}
