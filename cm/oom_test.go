package cm

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSetOOMScoreAdj(t *testing.T) {
	p := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetOOMScoreAdj(p, AgentOOMScoreAdj); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "-999" {
		t.Errorf("wrote %q, want kubelet's -999", b)
	}
	if err := SetOOMScoreAdj(filepath.Join(t.TempDir(), "missing", "oom_score_adj"), -999); err == nil {
		t.Error("no error for a file that cannot be opened")
	}
}
