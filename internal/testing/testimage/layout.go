package testimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Spec describes a single-layer image: the files of its layer and the parts
// of the image config that a Dockerfile sets.
type Spec struct {
	Ref        string // the name containerd imports it under, e.g. registry.k8s.io/pause:3.10.1
	Files      []File // the layer, in this order
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// File is one entry of a layer.
type File struct {
	Path     string // inside the image, relative ("bin/sh"); directories end in "/"
	Type     byte   // tar.TypeDir, tar.TypeReg, tar.TypeSymlink or tar.TypeLink
	Mode     int64  // permission bits, including setuid/setgid/sticky
	Data     []byte // content of a regular file
	Link     string // target of a symlink, or the path of a hard link's original
	UID, GID int
}

// Dir, Reg and Symlink shorten the common entries.
func Dir(path string, mode int64) File {
	return File{Path: strings.TrimSuffix(path, "/") + "/", Type: tar.TypeDir, Mode: mode}
}

func Reg(path string, mode int64, data []byte) File {
	return File{Path: path, Type: tar.TypeReg, Mode: mode, Data: data}
}

func Symlink(path, target string) File {
	return File{Path: path, Type: tar.TypeSymlink, Mode: 0o777, Link: target}
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// Archive returns the image as an OCI image layout tar archive, which
// containerd's import takes (runtime.Runtime.ImportImage). The same Spec
// always gives the same bytes (timestamps are the epoch), so importing it
// again is cheap and keeps the image ID.
func (s Spec) Archive() ([]byte, error) {
	if s.Ref == "" || !strings.Contains(s.Ref, ":") {
		return nil, fmt.Errorf("testimage: ref %q: want name:tag", s.Ref)
	}
	// Layer: a plain (uncompressed) tar.
	var lb bytes.Buffer
	tw := tar.NewWriter(&lb)
	mtime := time.Unix(0, 0)
	for _, f := range s.Files {
		h := &tar.Header{Typeflag: f.Type, Name: f.Path, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: mtime, Linkname: f.Link}
		if f.Type == tar.TypeReg {
			h.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("testimage: %s: %s: %w", s.Ref, f.Path, err)
		}
		if f.Type == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("testimage: %s: %s: %w", s.Ref, f.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer := newBlob(lb.Bytes())

	cfg := map[string]any{}
	if len(s.Env) > 0 {
		cfg["Env"] = s.Env
	}
	if len(s.Entrypoint) > 0 {
		cfg["Entrypoint"] = s.Entrypoint
	}
	if len(s.Cmd) > 0 {
		cfg["Cmd"] = s.Cmd
	}
	if s.User != "" {
		cfg["User"] = s.User
	}
	wd := s.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cfg["WorkingDir"] = wd
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       cfg,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layer.digest}},
	})
	cb := newBlob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cb.digest, "size": len(cb.data)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer.digest, "size": len(layer.data)}},
	})
	man := newBlob(manifest)
	tag := s.Ref[strings.LastIndex(s.Ref, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType":   "application/vnd.oci.image.manifest.v1+json",
			"digest":      man.digest,
			"size":        len(man.data),
			"platform":    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": s.Ref, "org.opencontainers.image.ref.name": tag},
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
	for _, b := range []blob{layer, cb, man} {
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
