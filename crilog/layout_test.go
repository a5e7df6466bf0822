package crilog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLayoutNames(t *testing.T) {
	if got, want := ContainerLogPath("/var/log/pods", "kube-system", "coredns-7d8f", "0b1c-uid", "coredns", 3),
		"/var/log/pods/kube-system_coredns-7d8f_0b1c-uid/coredns/3.log"; got != want {
		t.Errorf("ContainerLogPath = %q, want %q", got, want)
	}
	id := strings.Repeat("ab", 32)
	link := SymlinkPath("/var/log/containers", "coredns-7d8f", "kube-system", "coredns", id)
	if want := "/var/log/containers/coredns-7d8f_kube-system_coredns-" + id + ".log"; link != want {
		t.Errorf("SymlinkPath = %q, want %q", link, want)
	}
	if got := ContainerIDFromSymlink(link); got != id {
		t.Errorf("ContainerIDFromSymlink(%q) = %q, want %q", link, got, id)
	}
	for _, tc := range []struct{ dir, uid string }{
		{"default_web_1234-abcd", "1234-abcd"},
		{"1234-abcd", "1234-abcd"}, // kubelet's oldest layout: the UID alone
		{"ns_name_with_underscores?_uid", "uid"},
	} {
		if got := PodUIDFromLogDir(tc.dir); got != tc.uid {
			t.Errorf("PodUIDFromLogDir(%q) = %q, want %q", tc.dir, got, tc.uid)
		}
	}
}

// kubelet cuts a name over ext4's 255 bytes, ".log" included.
func TestSymlinkNameCut(t *testing.T) {
	long := strings.Repeat("p", 253) // a DNS subdomain may be 253 bytes
	link := SymlinkPath("/c", long, "ns", "app", strings.Repeat("f", 64))
	base := filepath.Base(link)
	if len(base) != 255 || !strings.HasSuffix(base, ".log") || !strings.HasPrefix(base, long[:250]) {
		t.Fatalf("cut name %q (%d bytes)", base, len(base))
	}
}

func TestContainerIDFromSymlink(t *testing.T) {
	for _, tc := range []struct{ name, id string }{
		{"/d/web_default_app-0123456789abcdef.log", "0123456789abcdef"},
		{"/d/web_default_my-app-abcdef.log", "abcdef"},
		{"/d/web_default_app-abc.log", ""}, // shorter than 6
		{"/d/web_default_app-abcdef.txt", ""},
		{"/d/nodash.log", ""},
	} {
		if got := ContainerIDFromSymlink(tc.name); got != tc.id {
			t.Errorf("ContainerIDFromSymlink(%q) = %q, want %q", tc.name, got, tc.id)
		}
	}
}

func TestLinkContainerLog(t *testing.T) {
	dir := t.TempDir()
	logA, logB := filepath.Join(dir, "pods", "0.log"), filepath.Join(dir, "pods", "1.log")
	link := filepath.Join(dir, "containers", "web_default_app-abcdef.log")
	if err := LinkContainerLog(link, logA); err != nil { // creates the directory
		t.Fatal(err)
	}
	if got, _ := os.Readlink(link); got != logA {
		t.Fatalf("link -> %q, want %q", got, logA)
	}
	if err := LinkContainerLog(link, logA); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := LinkContainerLog(link, logB); err != nil { // replaced
		t.Fatal(err)
	}
	if got, _ := os.Readlink(link); got != logB {
		t.Fatalf("link -> %q, want %q", got, logB)
	}
	if fi, err := os.Stat(filepath.Dir(link)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("symlink directory: %v %v", fi, err)
	}
	if err := UnlinkContainerLog(link); err != nil {
		t.Fatal(err)
	}
	if err := UnlinkContainerLog(link); err != nil { // already gone
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("link still there: %v", err)
	}
}

// Rotation renames the live file and opens a new one at the same path: a
// symlink to the path reads the new live file.
func TestSymlinkFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pods", "ns_p_uid", "app", "0.log")
	link := SymlinkPath(filepath.Join(dir, "containers"), "p", "ns", "app", "0123456789")
	if err := LinkContainerLog(link, path); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWriter(path, Rotation{MaxSize: 200, MaxFiles: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var lines []string
	for i := 0; i < 20; i++ {
		lines = append(lines, strings.Repeat("x", 20)+"-"+string(rune('a'+i)))
	}
	if err := w.Copy(strings.NewReader(strings.Join(lines, "\n")+"\n"), Stdout); err != nil {
		t.Fatal(err)
	}
	rotated, _ := RotatedFiles(path)
	if len(rotated) == 0 {
		t.Fatal("no rotation happened")
	}
	b, err := os.ReadFile(link)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), lines[len(lines)-1]) || strings.Contains(string(b), lines[0]+"\n") {
		t.Fatalf("the symlink does not read the live file after rotation: %q", b)
	}
}
