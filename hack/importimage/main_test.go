package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

func TestRunRefusesBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		desc, address, namespace, want string
	}{
		{desc: "no address", namespace: "k8s.io", want: "--address is required"},
		{desc: "relative address", address: "containerd.sock", namespace: "k8s.io", want: "must be an absolute socket path"},
		{desc: "no socket", address: "unix://" + filepath.Join(t.TempDir(), "none.sock"), namespace: "k8s.io", want: "no containerd socket there"},
		{desc: "not a socket", address: t.TempDir(), namespace: "k8s.io", want: "not a socket"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := run(ctx, tc.address, tc.namespace)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q, %q) = %v, want an error containing %q", tc.address, tc.namespace, err, tc.want)
			}
		})
	}
}

// TestRunImports imports the image into a private containerd, twice (make
// run may find it there), and finds it in that namespace only.
func TestRunImports(t *testing.T) {
	cd := testimage.StartContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "importimage-test"
	var first runtime.Image
	for i := 0; i < 2; i++ {
		img, err := run(ctx, cd.Address, ns)
		if err != nil {
			t.Fatalf("import %d: %v", i+1, err)
		}
		if !strings.HasPrefix(img.ID, "sha256:") {
			t.Fatalf("import %d: image ID %q is not a digest", i+1, img.ID)
		}
		if i == 0 {
			first = img
		} else if img.ID != first.ID {
			t.Fatalf("second import changed the image ID: %s, then %s", first.ID, img.ID)
		}
	}
	other, err := runtime.New(runtime.Options{Address: cd.Address, Namespace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.GetImage(ctx, testimage.Ref); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("GetImage(%s) in namespace %q = %v, want ErrNotFound: the image belongs in %q only", testimage.Ref, "other", err, ns)
	}
}

// TestRunE2EImports imports the e2e images, made of stand-in programs,
// into a private containerd under the names the upstream specs use, twice.
func TestRunE2EImports(t *testing.T) {
	if _, err := os.Stat(testimage.BusyboxPath); err != nil {
		t.Skip("busybox-static not installed")
	}
	cd := testimage.StartContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, f := range []string{"agnhost", "nnp", "pause", "localhost.crt", "localhost.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("stand-in "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The host's busybox stands in for the one hack/conformance.sh builds.
	bb, err := os.ReadFile(testimage.BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	const ns = "importimage-e2e"
	want := []string{testimage.E2EBusyboxRef, testimage.E2EAgnhostRef, testimage.E2EPauseRef, testimage.E2ENonewprivsRef, testimage.E2ENonRootRef}
	var first []imported
	for i := 0; i < 2; i++ {
		imgs, err := runE2E(ctx, cd.Address, ns, dir)
		if err != nil {
			t.Fatalf("import %d: %v", i+1, err)
		}
		var refs []string
		for _, img := range imgs {
			refs = append(refs, img.Ref)
		}
		if !slices.Equal(refs, want) {
			t.Fatalf("import %d: imported %q, want %q", i+1, refs, want)
		}
		if i == 0 {
			first = imgs
		} else if imgs[1].ID != first[1].ID {
			t.Fatalf("second import changed agnhost's image ID: %s, then %s", first[1].ID, imgs[1].ID)
		}
	}
	if _, err := runE2E(ctx, cd.Address, ns, t.TempDir()); err == nil || !strings.Contains(err.Error(), "agnhost") {
		t.Fatalf("runE2E without the programs = %v, want an error naming agnhost", err)
	}
}
