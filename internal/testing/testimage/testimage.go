// Package testimage builds a tiny OCI image from the host's statically linked
// busybox (Debian's busybox-static) so that tests can run real containers
// without a registry, and runs private containerd daemons for those tests.
// It also builds stand-ins for the upstream e2e test images (E2EImages) for
// the conformance specs, and single-layer images in general (Spec).
//
// It does not import containerd: Import hands the archive to anything with an
// ImportImage method (runtime.Runtime has one).
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// Ref is the reference the image is imported under.
const Ref = "docker.io/nodeagent/busybox:test"

// BusyboxPath is where busybox-static installs the binary.
const BusyboxPath = "/bin/busybox"

// applets get a symlink to busybox in /bin.
var applets = []string{"sh", "sleep", "cat", "echo", "true", "false", "kill", "ls", "ps", "env", "date", "touch", "trap", "yes", "head", "tar"}

var (
	once     sync.Once
	archive  []byte
	buildErr error
)

// Archive returns the image as an OCI image layout tar archive (built once
// per process).
func Archive() ([]byte, error) {
	once.Do(func() { archive, buildErr = build() })
	return archive, buildErr
}

// Files returns the archive's files by path (index.json, oci-layout,
// blobs/sha256/<digest>): what a test registry serves.
func Files() (map[string][]byte, error) {
	a, err := Archive()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("testimage: read archive: %w", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("testimage: read archive: %w", err)
		}
		files[h.Name] = data
	}
}

// Importer is what Import needs: runtime.Runtime satisfies it.
type Importer[I any] interface {
	ImportImage(ctx context.Context, archive io.Reader) ([]I, error)
}

// Import builds the image and imports it; the image is then available as Ref.
func Import[I any](ctx context.Context, im Importer[I]) error {
	a, err := Archive()
	if err != nil {
		return err
	}
	if _, err := im.ImportImage(ctx, bytes.NewReader(a)); err != nil {
		return fmt.Errorf("testimage: import: %w", err)
	}
	return nil
}

func build() ([]byte, error) {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("testimage: %w (install busybox-static)", err)
	}
	var files []File
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "tmp", "var", "root"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		files = append(files, Dir(d, mode))
	}
	files = append(files, Reg("bin/busybox", 0o755, bb))
	for _, a := range applets {
		files = append(files, Symlink("bin/"+a, "busybox"))
	}
	files = append(files,
		Reg("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")),
		Reg("etc/group", 0o644, []byte("root:x:0:\n")))
	return Spec{
		Ref:   Ref,
		Files: files,
		Env:   []string{"PATH=/bin"},
		Cmd:   []string{"/bin/sh"},
	}.Archive()
}
