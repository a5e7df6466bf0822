// Package testimage builds a tiny OCI image from the host's statically linked
// busybox (Debian's busybox-static) so that tests can run real containers
// without a registry, and runs private containerd daemons for those tests.
//
// It does not import containerd: Import hands the archive to anything with an
// ImportImage method (runtime.Runtime has one).
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"
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

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

func build() ([]byte, error) {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("testimage: %w (install busybox-static)", err)
	}
	// Layer: a plain (uncompressed) tar.
	var lb bytes.Buffer
	tw := tar.NewWriter(&lb)
	mtime := time.Unix(0, 0)
	for _, d := range []string{"bin/", "dev/", "etc/", "proc/", "sys/", "tmp/", "var/", "root/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bb); err != nil {
		return nil, err
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer := newBlob(lb.Bytes())

	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/bin"},
			"Cmd":        []string{"/bin/sh"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.digest}},
	})
	cfg := newBlob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg.digest, "size": len(cfg.data)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer.digest, "size": len(layer.data)}},
	})
	man := newBlob(manifest)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType":   "application/vnd.oci.image.manifest.v1+json",
			"digest":      man.digest,
			"size":        len(man.data),
			"platform":    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": Ref, "org.opencontainers.image.ref.name": "test"},
		}},
	})

	var out bytes.Buffer
	ow := tar.NewWriter(&out)
	add := func(name string, data []byte) error {
		if err := ow.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := ow.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	for _, b := range []blob{layer, cfg, man} {
		if err := add("blobs/sha256/"+b.digest[len("sha256:"):], b.data); err != nil {
			return nil, err
		}
	}
	if err := add("index.json", index); err != nil {
		return nil, err
	}
	if err := ow.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
