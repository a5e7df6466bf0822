package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// bareRuntime is a runtime on a fresh containerd namespace with nothing
// imported, so that a pull fetches every blob from the registry.
func bareRuntime(t *testing.T, cd *testimage.Containerd, ns string, set func(*runtime.Options)) *runtime.Runtime {
	t.Helper()
	opts := runtime.Options{
		Address:      cd.Address,
		Namespace:    ns,
		CgroupParent: cd.CgroupParent,
		CallTimeout:  20 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	if set != nil {
		set(&opts)
	}
	rt, err := runtime.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// closedPort returns a loopback host:port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// writeHosts writes <root>/<host dir>/hosts.toml for registry host.
func writeHosts(t *testing.T, root, host, body string) {
	t.Helper()
	dir := filepath.Join(root, strings.Replace(host, ":", "_", 1)+"_")
	if !strings.Contains(host, ":") {
		dir = filepath.Join(root, host)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A pull of an image whose registry is unreachable goes through the
// mirror configured for it only in hosts.toml: an HTTP mirror with basic
// auth (the credentials looked up for the upstream registry are offered
// to the mirror, as containerd CRI does), and an HTTPS mirror trusted
// only through the hosts.toml `ca`.
func TestPullThroughHostsTomlMirror(t *testing.T) {
	cd := testimage.StartContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	mirror, err := testimage.NewRegistryWith(testimage.RegistryOptions{Users: map[string]string{"alice": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	tlsMirror, err := testimage.NewRegistryWith(testimage.RegistryOptions{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsMirror.Close()

	upstream := closedPort(t) // the image's own registry: nothing listens
	ref := upstream + "/mirrored/busybox:v1"
	root := t.TempDir()
	caFile := filepath.Join(root, "mirror-ca.pem")
	if err := os.WriteFile(caFile, tlsMirror.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	writeHosts(t, root, upstream, fmt.Sprintf(`
server = "http://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, upstream, mirror.Host))

	// Without the configuration, the unreachable registry fails the pull.
	plain := bareRuntime(t, cd, "plain", nil)
	if _, err := plain.PullImageWithAuth(ctx, ref, &runtime.RegistryAuth{Username: "alice", Password: "s3cret"}); err == nil {
		t.Fatal("a pull from a registry nothing listens on succeeded without a mirror")
	} else {
		t.Logf("without hosts.toml: %v", err)
	}

	rt := bareRuntime(t, cd, "mirrored", func(o *runtime.Options) { o.RegistryConfigPath = root })
	if _, err := rt.PullImageWithAuth(ctx, ref, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("anonymous pull through the auth mirror: %v, want a 401", err)
	}
	img, err := rt.PullImageWithAuth(ctx, ref, &runtime.RegistryAuth{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	if mirror.Manifests() == 0 || mirror.BlobBytes() == 0 {
		t.Fatalf("the mirror served %d manifests, %d blob bytes", mirror.Manifests(), mirror.BlobBytes())
	}
	got, err := rt.GetImage(ctx, ref)
	if err != nil || got.ID != img.ID {
		t.Fatalf("GetImage(%q) = %+v, %v; pulled %s", ref, got, err, img.ID)
	}
	t.Logf("pulled %s (%d bytes) through mirror %s", ref, img.Size, mirror.Host)

	// HTTPS mirror: trusted through `ca` only.
	tlsUpstream := closedPort(t)
	tlsRef := tlsUpstream + "/tls/busybox:v1"
	hostsFor := func(withCA bool) string {
		ca := ""
		if withCA {
			ca = fmt.Sprintf("  ca = %q\n", caFile)
		}
		return fmt.Sprintf("server = \"http://%s\"\n\n[host.\"https://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n%s", tlsUpstream, tlsMirror.Host, ca)
	}
	writeHosts(t, root, tlsUpstream, hostsFor(false))
	if _, err := rt.PullImage(ctx, tlsRef); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("pull through an HTTPS mirror with an unknown CA: %v, want a certificate error", err)
	} else {
		t.Logf("unknown CA: %v", err)
	}
	writeHosts(t, root, tlsUpstream, hostsFor(true)) // read on every pull
	if _, err := rt.PullImage(ctx, tlsRef); err != nil {
		t.Fatalf("pull through the HTTPS mirror with its CA in hosts.toml: %v", err)
	}
	if tlsMirror.Manifests() == 0 {
		t.Fatal("the HTTPS mirror served no manifest")
	}
}

// A slow pull that keeps receiving bytes runs well past the progress
// timeout; a pull whose download stalls is cancelled once the timeout
// passed without a byte, with an error saying so.
func TestPullProgressTimeout(t *testing.T) {
	cd := testimage.StartContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const timeout = 2 * time.Second

	slow, err := testimage.NewRegistryWith(testimage.RegistryOptions{BlobChunk: 128 << 10, BlobInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	rt := bareRuntime(t, cd, "slow", func(o *runtime.Options) { o.PullProgressTimeout = timeout })
	start := time.Now()
	img, err := rt.PullImage(ctx, slow.Host+"/slow/busybox:v1")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("slow pull after %s: %v", took, err)
	}
	t.Logf("slow pull: %d blob bytes in %s (progress timeout %s), image %d bytes", slow.BlobBytes(), took, timeout, img.Size)
	if took < 3*timeout {
		t.Fatalf("the slow pull took %s only: not slow enough to test the timeout (blob bytes %d)", took, slow.BlobBytes())
	}

	stalled, err := testimage.NewRegistryWith(testimage.RegistryOptions{StallAfter: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	// A containerd of its own: the blobs of the slow pull are in the
	// first one's content store.
	rt2 := bareRuntime(t, testimage.StartContainerd(t), "stalled", func(o *runtime.Options) { o.PullProgressTimeout = timeout })
	start = time.Now()
	_, err = rt2.PullImage(ctx, stalled.Host+"/stalled/busybox:v1")
	took = time.Since(start)
	if !errors.Is(err, runtime.ErrPullStalled) {
		t.Fatalf("stalled pull after %s: %v, want ErrPullStalled", took, err)
	}
	t.Logf("stalled pull cancelled after %s: %v", took, err)
	if took < timeout || took > timeout+30*time.Second {
		t.Fatalf("stalled pull cancelled after %s, want a little over %s", took, timeout)
	}
	if _, err := rt2.GetImage(ctx, stalled.Host+"/stalled/busybox:v1"); err == nil {
		t.Fatal("a cancelled pull stored the image")
	}
}
