package runtime_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

func TestNormalizeImageRef(t *testing.T) {
	const dgst = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "busybox", want: "docker.io/library/busybox:latest"},
		{in: "busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{in: "docker.io/library/busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{in: "nodeagent/busybox:test", want: testimage.Ref},
		{in: testimage.Ref, want: testimage.Ref},
		{in: "registry.k8s.io/pause:3.10", want: "registry.k8s.io/pause:3.10"},
		{in: "localhost:5000/x", want: "localhost:5000/x:latest"},
		{in: "busybox@" + dgst, want: "docker.io/library/busybox@" + dgst},
		{in: "busybox:1.36@" + dgst, want: "docker.io/library/busybox@" + dgst},
		{in: "", wantErr: true},
		{in: "BusyBox", wantErr: true},
		{in: "busybox:", wantErr: true},
		{in: "a b", wantErr: true},
	} {
		got, err := runtime.NormalizeImageRef(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NormalizeImageRef(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestGetImage(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()
	imgs, err := rt.ListImages(ctx)
	if err != nil || len(imgs) != 1 {
		t.Fatalf("ListImages = %+v, %v", imgs, err)
	}
	for _, ref := range []string{testimage.Ref, "nodeagent/busybox:test"} {
		img, err := rt.GetImage(ctx, ref)
		if err != nil {
			t.Fatalf("GetImage(%q): %v", ref, err)
		}
		if img.ID != imgs[0].ID || len(img.Names) != 1 || img.Names[0] != testimage.Ref || img.Size != imgs[0].Size {
			t.Fatalf("GetImage(%q) = %+v, want %+v", ref, img, imgs[0])
		}
	}
	if _, err := rt.GetImage(ctx, "busybox:absent"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("GetImage of an absent image: %v, want ErrNotFound", err)
	}
	if _, err := rt.GetImage(ctx, "Not/Valid"); err == nil || errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("GetImage of an invalid reference: %v, want a non-NotFound error", err)
	}

	// CreateContainer accepts the short form and records the full one.
	s := spec("img", "main", "true")
	s.Image = "nodeagent/busybox:test"
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.InspectContainer(ctx, id)
	if err != nil || c.Image != testimage.Ref {
		t.Fatalf("container image %q (err %v), want %q", c.Image, err, testimage.Ref)
	}
	s.Image = "busybox:absent"
	if _, err := rt.CreateContainer(ctx, s); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("create with an absent image: %v, want ErrNotFound", err)
	}
}

// No registry is reachable from the test machine: a pull from a closed port
// must fail quickly, with an error naming the reference.
func TestPullImageUnreachable(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := rt.PullImage(ctx, "127.0.0.1:1/x:y")
	if err == nil {
		t.Fatal("pull from a closed port succeeded")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("pull failed only after %s", d)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/x:y") {
		t.Fatalf("error %q does not name the reference", err)
	}
	t.Logf("pull error: %v", err)
	if _, err := rt.PullImage(ctx, "Not Valid"); !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Fatalf("pull of an invalid reference: %v, want ErrInvalidSpec", err)
	}
}

// A pull from a registry (a minimal in-test implementation of the
// distribution API over plain HTTP on localhost, serving the test image)
// stores the image under its reference, unpacked: a container runs from it.
func TestPullImage(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := newRegistry(t)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/team/busybox:v1"
	img, err := rt.PullImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	imported, err := rt.GetImage(ctx, testimage.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.ID != imported.ID {
		t.Fatalf("pulled image ID %s, want the test image's config %s", img.ID, imported.ID)
	}
	got, err := rt.GetImage(ctx, ref)
	if err != nil || got.ID != img.ID {
		t.Fatalf("GetImage(%q) = %+v, %v", ref, got, err)
	}
	s := spec("pulled", "main", "sh", "-c", "exit 4")
	s.Image = ref
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if c := waitState(t, rt, id, runtime.StateExited); c.ExitCode != 4 {
		t.Fatalf("container of the pulled image: %+v", c)
	}
	if _, err := rt.PullImage(ctx, strings.TrimPrefix(reg.URL, "http://")+"/team/busybox:absent"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("pull of an absent tag: %v, want ErrNotFound", err)
	}
}

func newRegistry(t *testing.T) *httptest.Server {
	t.Helper()
	reg, err := testimage.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg.Server
}
