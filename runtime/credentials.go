package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/platforms"
	"github.com/containerd/containerd/remotes"
	"github.com/containerd/containerd/remotes/docker"
	"github.com/containerd/containerd/remotes/docker/config"
)

// RegistryAuth is a username and password for a registry (basic auth, or
// the credentials exchanged for a bearer token where the registry asks for
// one).
type RegistryAuth struct {
	Username string
	Password string
}

// ErrPullStalled is the cause of a pull cancelled because it made no
// progress for Options.PullProgressTimeout.
var ErrPullStalled = errors.New("no progress")

// PullImageWithAuth is PullImage with credentials for the image's registry
// (nil: anonymous). The agent's process talks to the registry, through the
// hosts Options.RegistryConfigPath configures for the image's registry
// (containerd's hosts.toml layout: mirrors, CA, client certificates,
// skip_verify; see registryHosts), else the registry itself over HTTPS, or
// HTTP for a loopback registry with a port (HTTPS first, as containerd).
// The credentials are offered to every host of this pull, mirrors included,
// as containerd's CRI plugin offers the credentials kubelet looked up for
// the image's registry.
//
// The pull has no deadline of its own: it is cancelled when no bytes have
// arrived from the registry for Options.PullProgressTimeout while a
// request is open (containerd CRI's image_pull_progress_timeout), and the
// error then wraps ErrPullStalled.
func (r *Runtime) PullImageWithAuth(ctx context.Context, ref string, auth *RegistryAuth) (Image, error) {
	name, err := NormalizeImageRef(ref)
	if err != nil {
		return Image{}, fmt.Errorf("runtime: pull: %w: %w", ErrInvalidSpec, err)
	}
	// Not callCtx: a pull transfers layers and takes longer than a call.
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	prog := &pullProgress{}
	stopWatch := r.watchPull(ctx, prog, func() {
		cancel(fmt.Errorf("%w for %s while pulling (image pull progress timeout)", ErrPullStalled, r.opts.PullProgressTimeout))
	})
	img, err := r.client.Pull(ctx, name,
		containerd.WithResolver(r.resolver(ctx, auth, prog)),
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(r.opts.Snapshotter),
		containerd.WithPlatformMatcher(platforms.Default()))
	stopWatch()
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrPullStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return Image{}, fmt.Errorf("runtime: pull %s: %w", name, convertErr(err))
	}
	return r.imageInfo(ctx, img.Metadata())
}

// resolver is a Docker registry resolver for one pull: its hosts come from
// registryHosts, every HTTP client counts the bytes it reads into prog, and
// auth (if any) is offered to every host.
func (r *Runtime) resolver(ctx context.Context, auth *RegistryAuth, prog *pullProgress) remotes.Resolver {
	return docker.NewResolver(docker.ResolverOptions{
		Hosts: r.registryHosts(ctx, auth, prog),
	})
}

// registryHosts configures the hosts of a registry with containerd's own
// code (remotes/docker/config.ConfigureHosts), reading
// <root>/<host>/hosts.toml (":port" written "_port_" first, then
// "<root>/_default") under each root of Options.RegistryConfigPath, as
// containerd's CRI plugin does with its registry.config_path. A registry
// without a directory gets the defaults: docker.io is
// registry-1.docker.io, a loopback registry with a port is tried over
// HTTPS then HTTP, any other over HTTPS.
func (r *Runtime) registryHosts(ctx context.Context, auth *RegistryAuth, prog *pullProgress) docker.RegistryHosts {
	var opts config.HostOptions
	if auth != nil {
		a := *auth
		opts.Credentials = func(string) (string, string, error) { return a.Username, a.Password, nil }
	}
	if prog != nil {
		opts.UpdateClient = prog.updateClient
	}
	if roots := filepath.SplitList(r.opts.RegistryConfigPath); len(roots) > 0 {
		opts.HostDir = hostDirFromRoots(roots)
	}
	return config.ConfigureHosts(ctx, opts)
}

// hostDirFromRoots finds a registry's host directory in the first root
// that has one (containerd CRI's lookup over a config_path list).
func hostDirFromRoots(roots []string) func(string) (string, error) {
	fns := make([]func(string) (string, error), len(roots))
	for i, root := range roots {
		fns[i] = config.HostDirFromRoot(root)
	}
	return func(host string) (string, error) {
		for _, fn := range fns {
			dir, err := fn(host)
			if (err != nil && !errdefs.IsNotFound(err)) || dir != "" {
				return dir, err
			}
		}
		return "", errdefs.ErrNotFound
	}
}

// registryEndpoint is one host a pull from a registry tries, in order.
type registryEndpoint struct {
	// URL is scheme://host/path of the registry API ("https://mirror:5000/v2").
	URL string
	// Pull and Resolve are the host's capabilities: fetching content by
	// digest, resolving a tag to a digest.
	Pull, Resolve bool
}

// registryEndpoints returns the hosts a pull from registry (a host[:port],
// "docker.io") tries, in order, as Options.RegistryConfigPath configures
// them. Hosts without the pull capability (push only) are left out.
func (r *Runtime) registryEndpoints(ctx context.Context, registry string) ([]registryEndpoint, error) {
	hosts, err := r.registryHosts(ctx, nil, nil)(registry)
	if err != nil {
		return nil, fmt.Errorf("runtime: registry hosts of %s: %w", registry, err)
	}
	var out []registryEndpoint
	for _, h := range hosts {
		if !h.Capabilities.Has(docker.HostCapabilityPull) {
			continue
		}
		out = append(out, registryEndpoint{
			URL:     h.Scheme + "://" + h.Host + h.Path,
			Pull:    true,
			Resolve: h.Capabilities.Has(docker.HostCapabilityResolve),
		})
	}
	return out, nil
}
