package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/platforms"
	"github.com/containerd/containerd/remotes"
	"github.com/containerd/containerd/remotes/docker"
)

// RegistryAuth is a username and password for a registry (basic auth, or
// the credentials exchanged for a bearer token where the registry asks for
// one).
type RegistryAuth struct {
	Username string
	Password string
}

// PullImageWithAuth is PullImage with credentials for the image's registry
// (nil: anonymous). The agent's process talks to the registry: HTTPS, or
// plain HTTP for a loopback registry (localhost, 127.0.0.1, ::1 with any
// port) as containerd's and Docker's defaults do; nothing else is plain.
// The credentials are offered only to the registry of this pull.
func (r *Runtime) PullImageWithAuth(ctx context.Context, ref string, auth *RegistryAuth) (Image, error) {
	name, err := NormalizeImageRef(ref)
	if err != nil {
		return Image{}, fmt.Errorf("runtime: pull: %w: %w", ErrInvalidSpec, err)
	}
	// Not callCtx: a pull transfers layers and takes longer than a call.
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	ctx, cancel := context.WithTimeout(ctx, r.opts.PullTimeout)
	defer cancel()
	img, err := r.client.Pull(ctx, name,
		containerd.WithResolver(resolver(auth)),
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(r.opts.Snapshotter),
		containerd.WithPlatformMatcher(platforms.Default()))
	if err != nil {
		return Image{}, fmt.Errorf("runtime: pull %s: %w", name, convertErr(err))
	}
	return r.imageInfo(ctx, img.Metadata())
}

// resolver is a Docker registry resolver offering auth (if any) to the
// registry, plain HTTP for loopback registries only.
func resolver(auth *RegistryAuth) remotes.Resolver {
	var aopts []docker.AuthorizerOpt
	if auth != nil {
		a := *auth
		aopts = append(aopts, docker.WithAuthCreds(func(string) (string, string, error) {
			return a.Username, a.Password, nil
		}))
	}
	return docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(
			docker.WithAuthorizer(docker.NewDockerAuthorizer(aopts...)),
			docker.WithPlainHTTP(docker.MatchLocalhost),
		),
	})
}
