package cm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSetOOMScoreAdj(t *testing.T) {
	p := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetOOMScoreAdj(p, -999); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "-999" {
		t.Errorf("wrote %q, want kubelet's -999", b)
	}
	if err := SetOOMScoreAdj(filepath.Join(t.TempDir(), "missing", "oom_score_adj"), -999); err == nil {
		t.Error("no error for a file that cannot be opened")
	}
}

// SetMaxOpenFiles sets the calling process's soft and hard limit, as
// kubelet's rlimit.SetNumFiles; checked in a child process (this test
// binary re-run) so that the test process keeps its own limit.
func TestSetMaxOpenFiles(t *testing.T) {
	if n := os.Getenv("CM_TEST_MAX_OPEN_FILES"); n != "" {
		v, _ := strconv.ParseInt(n, 10, 64)
		if err := SetMaxOpenFiles(v); err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		b, _ := os.ReadFile("/proc/self/limits")
		fmt.Print(string(b))
		os.Exit(0)
	}
	line := func(limits string) string {
		for _, l := range strings.Split(limits, "\n") {
			if strings.HasPrefix(l, "Max open files") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return ""
	}
	self, _ := os.ReadFile("/proc/self/limits")
	for _, tc := range []struct{ n, want string }{
		{"4096", "Max open files 4096 4096 files"},
		{"0", line(string(self))}, // unchanged: inherited from this process
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetMaxOpenFiles$")
		cmd.Env = append(os.Environ(), "CM_TEST_MAX_OPEN_FILES="+tc.n)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.n, err, out)
		}
		if got := line(string(out)); got != tc.want {
			t.Errorf("maxOpenFiles %s: %q, want %q", tc.n, got, tc.want)
		}
	}
}
