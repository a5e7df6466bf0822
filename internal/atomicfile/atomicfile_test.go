package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state")
	for _, content := range []string{"one", "two, longer"} {
		if err := Write(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("temporary files left: %v", es)
	}
	if err := Write(filepath.Join(dir, "missing", "state"), nil); err == nil {
		t.Error("no error for a missing directory")
	}
}
