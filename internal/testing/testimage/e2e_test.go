package testimage

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The e2e images are laid out as the specs expect: the names of
// test/utils/image/manifest.go, busybox's applets and accounts, agnhost's
// entrypoint and files, pause's user, nonewprivs' setuid program.
func TestE2EImagesLayout(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skip("busybox-static not installed")
	}
	dir := t.TempDir()
	for _, f := range []string{"agnhost", "nnp", "pause", "localhost.crt", "localhost.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("stand-in "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The host's busybox stands in for the one hack/conformance.sh builds.
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	specs, err := E2EImages(E2EInputsIn(dir))
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]Spec{}
	for _, s := range specs {
		byRef[s.Ref] = s
		if _, err := s.Archive(); err != nil {
			t.Errorf("%s: %v", s.Ref, err)
		}
	}
	file := func(ref, path string) File {
		t.Helper()
		for _, f := range byRef[ref].Files {
			if f.Path == path {
				return f
			}
		}
		t.Fatalf("%s has no %s", ref, path)
		return File{}
	}
	for _, applet := range []string{"sh", "nc", "wget", "id", "sleep", "ip"} {
		if f := file(E2EBusyboxRef, "bin/"+applet); f.Type != tar.TypeLink || f.Link != "bin/busybox" {
			t.Errorf("busybox bin/%s = %+v, want a hard link to bin/busybox", applet, f)
		}
	}
	if p := string(file(E2EBusyboxRef, "etc/passwd").Data); !strings.Contains(p, "nobody:x:65534:65534:") {
		t.Errorf("busybox /etc/passwd lacks nobody (65534):\n%s", p)
	}
	ag := byRef[E2EAgnhostRef]
	if !slices.Equal(ag.Entrypoint, []string{"/agnhost"}) || !slices.Equal(ag.Cmd, []string{"pause"}) {
		t.Errorf("agnhost entrypoint %q cmd %q", ag.Entrypoint, ag.Cmd)
	}
	if string(file(E2EAgnhostRef, "agnhost").Data) != "stand-in agnhost" || file(E2EAgnhostRef, "agnhost-2").Link != "agnhost" {
		t.Error("agnhost lacks /agnhost or the /agnhost-2 link")
	}
	file(E2EAgnhostRef, "localhost.crt")
	file(E2EAgnhostRef, "uploads/")
	if g := string(file(E2EAgnhostRef, "etc/group").Data); !strings.Contains(g, "group-defined-in-image:x:50000:user-defined-in-image") {
		t.Errorf("agnhost /etc/group:\n%s", g)
	}
	if c := file(E2EAgnhostRef, "usr/bin/curl"); c.Mode&0o111 == 0 || !strings.HasPrefix(string(c.Data), "#!/bin/sh") {
		t.Errorf("agnhost curl = %+v", c)
	}
	if p := byRef[E2EPauseRef]; p.User != "65535:65535" || !slices.Equal(p.Entrypoint, []string{"/pause"}) || len(p.Files) != 1 {
		t.Errorf("pause = user %q entrypoint %q, %d files", p.User, p.Entrypoint, len(p.Files))
	}
	if f := file(E2ENonewprivsRef, "usr/local/bin/nnp"); f.Mode&0o4000 == 0 || f.UID != 0 {
		t.Errorf("nnp mode %o uid %d, want setuid root", f.Mode, f.UID)
	}
	if byRef[E2ENonRootRef].User != "1234" {
		t.Errorf("nonroot user %q", byRef[E2ENonRootRef].User)
	}
	if f := file(E2EBusyboxRef, "bin/busybox"); !slices.Equal(f.Data, bb) {
		t.Error("busybox image's bin/busybox is not the input busybox")
	}
	if _, err := E2EImages(E2EInputsIn(t.TempDir())); err == nil || !strings.Contains(err.Error(), "agnhost") {
		t.Errorf("E2EImages without inputs = %v, want an error naming agnhost", err)
	}
	os.Remove(filepath.Join(dir, "busybox"))
	if _, err := E2EImages(E2EInputsIn(dir)); err == nil || !strings.Contains(err.Error(), "busybox") {
		t.Errorf("E2EImages without busybox = %v, want an error naming it", err)
	}
}
