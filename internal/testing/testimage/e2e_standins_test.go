package testimage

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The full suite's images: agnhost and jessie-dnsutils with dig and
// getent (hack/e2edns), nautilus and kitten are agnhost serving
// their html at /; httpd and nginx serve their document root on port 80
// with busybox's httpd.
func TestE2EStandIns(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skip("busybox-static not installed")
	}
	dir := t.TempDir()
	for _, f := range []string{"agnhost", "nnp", "pause", "localhost.crt", "localhost.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("stand-in "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	ti := t.TempDir()
	if err := os.WriteFile(filepath.Join(ti, "e2edns"), []byte("stand-in e2edns"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nautilus", "kitten"} {
		html := filepath.Join(ti, "test-images", n, "html")
		if err := os.MkdirAll(html, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, data := range map[string]string{n + ".jpg": "jpeg " + n, "data.json": `{"image": "` + n + `.jpg"}`} {
			if err := os.WriteFile(filepath.Join(html, f), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := E2EStandIns(E2EInputsIn(dir), t.TempDir()); err == nil {
		t.Error("E2EStandIns without e2edns and test-images = nil error")
	}
	specs, err := E2EStandIns(E2EInputsIn(dir), ti)
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
	has := func(ref, path, data string) {
		t.Helper()
		i := slices.IndexFunc(byRef[ref].Files, func(f File) bool { return f.Path == path })
		if i < 0 {
			t.Errorf("%s has no %s", ref, path)
			return
		}
		if data != "" && string(byRef[ref].Files[i].Data) != data {
			t.Errorf("%s %s = %q, want %q", ref, path, byRef[ref].Files[i].Data, data)
		}
	}
	for ref, n := range map[string]string{E2ENautilusRef: "nautilus", E2EKittenRef: "kitten"} {
		s := byRef[ref]
		if !slices.Equal(s.Entrypoint, []string{"/agnhost"}) || !slices.Equal(s.Cmd, []string{"test-webserver"}) {
			t.Errorf("%s entrypoint %q cmd %q, want /agnhost test-webserver", ref, s.Entrypoint, s.Cmd)
		}
		has(ref, "agnhost", "stand-in agnhost")
		has(ref, n+".jpg", "jpeg "+n)
		has(ref, "data.json", `{"image": "`+n+`.jpg"}`)
	}
	for ref, root := range map[string]string{E2EHttpdRef: "usr/local/apache2/htdocs", E2EHttpdNewRef: "usr/local/apache2/htdocs",
		E2ENginxRef: "usr/share/nginx/html", E2ENginxNewRef: "usr/share/nginx/html"} {
		s := byRef[ref]
		if !slices.Equal(s.Cmd, []string{"httpd", "-f", "-p", "80", "-h", "/" + root}) || len(s.Entrypoint) != 0 {
			t.Errorf("%s entrypoint %q cmd %q", ref, s.Entrypoint, s.Cmd)
		}
		has(ref, "bin/httpd", "")
		has(ref, root+"/", "")
		has(ref, root+"/index.html", "")
	}
	base, err := E2EImages(E2EInputsIn(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != len(base)+7 {
		t.Errorf("%d images, want E2EImages' %d and 7 more", len(specs), len(base))
	}
	for _, ref := range []string{E2EAgnhostRef, E2EJessieRef} {
		has(ref, "usr/bin/dig", "stand-in e2edns")
		if i := slices.IndexFunc(byRef[ref].Files, func(f File) bool { return f.Path == "usr/bin/getent" }); i < 0 || byRef[ref].Files[i].Link != "usr/bin/dig" {
			t.Errorf("%s: usr/bin/getent is not a link to usr/bin/dig", ref)
		}
	}
	// agnhost's nc and curl are the stand-in too, and E2EImages' curl
	// script is gone (one entry per path).
	for _, name := range []string{"usr/bin/nc", "usr/bin/curl"} {
		var n int
		for _, f := range byRef[E2EAgnhostRef].Files {
			if f.Path == name {
				n++
				if f.Type != tar.TypeLink || f.Link != "usr/bin/dig" {
					t.Errorf("agnhost: %s is %+v, want a link to usr/bin/dig", name, f)
				}
			}
		}
		if n != 1 {
			t.Errorf("agnhost: %d entries for %s, want 1", n, name)
		}
	}
}
