package testimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The archive is a valid OCI image layout: every blob is stored under its
// digest, the index points to the manifest, and the layer holds busybox.
func TestArchiveIsOCILayout(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skip("busybox-static not installed")
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != d {
				t.Errorf("blob %s does not match its digest", name)
			}
		}
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	if index.Manifests[0].Annotations["io.containerd.image.name"] != Ref {
		t.Errorf("image name annotation %v", index.Manifests[0].Annotations)
	}
	var manifest struct {
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	layer := files["blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")]
	lr := tar.NewReader(bytes.NewReader(layer))
	found := map[string]bool{}
	for {
		h, err := lr.Next()
		if err != nil {
			break
		}
		found[h.Name] = true
	}
	for _, want := range []string{"bin/busybox", "bin/sh", "bin/sleep", "tmp/"} {
		if !found[want] {
			t.Errorf("layer lacks %s", want)
		}
	}
}
