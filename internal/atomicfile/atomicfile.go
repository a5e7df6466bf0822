// Package atomicfile writes a file so that a reader, or the agent after a
// crash or power loss, finds either its old content or its new one: a
// temporary file in the same directory, written, synced and renamed over
// it (how kubelet's checkpoint manager writes its checkpoints).
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path's content with data (mode 0600 for a new file). The
// directory must exist.
func Write(path string, data []byte) error {
	dir, name := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, a no-op
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
