package fleetsim

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 566.
	line := []byte("4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 566 0 0 20 0 12 0 100 1000000 2500 18446744073709551615\n")
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUSeconds != 18 {
		t.Errorf("CPUSeconds = %v, want 18", got.CPUSeconds)
	}
	if _, err := parseStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("a short line parsed")
	}
	rss, err := parseVmRSS([]byte("Name:\tetcd\nVmPeak:\t 100 kB\nVmRSS:\t  2048 kB\n"))
	if err != nil || rss != 2048*1024 {
		t.Errorf("parseVmRSS = %d, %v; want 2 MiB", rss, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("status without VmRSS parsed")
	}
}

// ReadProc reads the real /proc.
func TestReadProcSelf(t *testing.T) {
	u, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSSBytes < 1<<20 {
		t.Errorf("own RSS %d B is implausibly small", u.RSSBytes)
	}
}

func TestIsNodeStatusWrite(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"PATCH", "/api/v1/nodes/n1/status", true},
		{"PUT", "/api/v1/nodes/n1/status", true},
		{"GET", "/api/v1/nodes/n1/status", false},
		{"PATCH", "/api/v1/nodes/n1", false},
		{"PATCH", "/api/v1/nodes//status", false},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", false},
		{"PATCH", "/api/v1/namespaces/default/pods/p/status", false},
	} {
		if got := IsNodeStatusWrite(tc.method, tc.path); got != tc.want {
			t.Errorf("IsNodeStatusWrite(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
