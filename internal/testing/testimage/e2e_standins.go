package testimage

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// The names of the images the [Conformance] specs use beyond E2EImages'
// (k8s.io/kubernetes test/utils/image/manifest.go at the pinned version).
const (
	E2EHttpdRef    = "registry.k8s.io/e2e-test-images/httpd:2.4.38-4"
	E2EHttpdNewRef = "registry.k8s.io/e2e-test-images/httpd:2.4.39-4"
	E2ENginxRef    = "registry.k8s.io/e2e-test-images/nginx:1.14-4"
	E2ENginxNewRef = "registry.k8s.io/e2e-test-images/nginx:1.15-4"
	E2ENautilusRef = "registry.k8s.io/e2e-test-images/nautilus:1.7"
	E2EKittenRef   = "registry.k8s.io/e2e-test-images/kitten:1.7"
	E2EJessieRef   = "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7"
)

// E2EStandIns returns the specs of every image the full [Conformance]
// suite uses (hack/conformance.sh --set=full): E2EImages' with two
// programs more in agnhost, and the further images, made of the same
// inputs and of what is in dir: test-images (upstream's test/images
// directory, in the k8s.io/kubernetes module) and e2edns (hack/e2edns, the
// stand-in for dig and getent):
//
//   - agnhost: as E2EImages', with /usr/bin/dig and /usr/bin/getent
//     (e2edns): upstream's image has them from Alpine's bind-tools and
//     musl, and the DNS specs' probe pods run them; and /usr/bin/nc and
//     /usr/bin/curl (e2edns too, in place of E2EImages' curl script):
//     Alpine's netcat-openbsd and curl upstream.
//   - jessie-dnsutils: upstream's is Debian jessie with dnsutils; here the
//     busybox image with /usr/bin/dig and /usr/bin/getent (e2edns).
//   - nautilus and kitten: as their Dockerfiles, the agnhost image with
//     test/images/<name>/html/{<name>.jpg,data.json} at /, CMD
//     ["test-webserver"] (agnhost serves / on port 80).
//   - httpd (2.4.38-4 and 2.4.39-4) and nginx (1.14-4 and 1.15-4): upstream
//     builds them FROM Docker Hub's httpd and nginx images, which cannot be
//     had here. Stand-ins: the busybox image serving the same document root
//     (/usr/local/apache2/htdocs, /usr/share/nginx/html) with an index.html
//     on port 80 with busybox's httpd in the foreground. The specs use them
//     as a pod that serves HTTP on port 80 and whose image changes (rolling
//     updates), and move index.html away to fail a readiness probe; none
//     depends on Apache or nginx themselves.
func E2EStandIns(in E2EInputs, dir string) ([]Spec, error) {
	base, err := E2EImages(in)
	if err != nil {
		return nil, err
	}
	dns, err := os.ReadFile(filepath.Join(dir, "e2edns"))
	if err != nil {
		return nil, fmt.Errorf("testimage: the dig and getent stand-in: %w", err)
	}
	dnsFiles := []File{Reg("usr/bin/dig", 0o755, dns), {Path: "usr/bin/getent", Type: tar.TypeLink, Mode: 0o755, Link: "usr/bin/dig"}}
	find := func(ref string) int {
		return slices.IndexFunc(base, func(s Spec) bool { return s.Ref == ref }) // E2EImages returns both refs below
	}
	ai := find(E2EAgnhostRef)
	// agnhost: the program also as nc and curl, in place of E2EImages'
	// curl script (the Services specs' reachability checks run OpenBSD
	// nc's `nc -v -t -w 2`, which busybox's nc refuses, and curl with -w,
	// -o and timeouts).
	agnFiles := slices.DeleteFunc(slices.Clone(base[ai].Files), func(f File) bool { return f.Path == "usr/bin/curl" })
	agnFiles = append(agnFiles, dnsFiles...)
	for _, name := range []string{"nc", "curl"} {
		agnFiles = append(agnFiles, File{Path: "usr/bin/" + name, Type: tar.TypeLink, Mode: 0o755, Link: "usr/bin/dig"})
	}
	base[ai].Files = agnFiles
	busybox, agnhost := base[find(E2EBusyboxRef)], base[ai]
	specs := append(base, Spec{Ref: E2EJessieRef, Files: append(slices.Clone(busybox.Files), dnsFiles...), Env: busybox.Env, Cmd: busybox.Cmd})
	for _, d := range []struct{ ref, name string }{{E2ENautilusRef, "nautilus"}, {E2EKittenRef, "kitten"}} {
		html := filepath.Join(dir, "test-images", d.name, "html")
		jpg, err := os.ReadFile(filepath.Join(html, d.name+".jpg"))
		if err != nil {
			return nil, fmt.Errorf("testimage: %s stand-in: %w", d.name, err)
		}
		data, err := os.ReadFile(filepath.Join(html, "data.json"))
		if err != nil {
			return nil, fmt.Errorf("testimage: %s stand-in: %w", d.name, err)
		}
		files := append(slices.Clone(agnhost.Files), Reg(d.name+".jpg", 0o644, jpg), Reg("data.json", 0o644, data))
		specs = append(specs, Spec{Ref: d.ref, Files: files, Env: agnhost.Env, Entrypoint: agnhost.Entrypoint, Cmd: []string{"test-webserver"}})
	}
	for _, d := range []struct{ ref, root, index string }{
		{E2EHttpdRef, "usr/local/apache2/htdocs", "<html><body><h1>It works!</h1></body></html>\n"},
		{E2EHttpdNewRef, "usr/local/apache2/htdocs", "<html><body><h1>It works!</h1></body></html>\n"},
		{E2ENginxRef, "usr/share/nginx/html", "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>\n"},
		{E2ENginxNewRef, "usr/share/nginx/html", "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>\n"},
	} {
		// The document root's directories below usr/, parents first.
		var dirs []File
		for p := d.root; p != "usr"; p = filepath.Dir(p) {
			dirs = append(dirs, Dir(p, 0o755))
		}
		slices.Reverse(dirs)
		files := append(slices.Clone(busybox.Files), dirs...)
		files = append(files, Reg(d.root+"/index.html", 0o644, []byte(d.index)))
		specs = append(specs, Spec{Ref: d.ref, Files: files, Env: busybox.Env,
			Cmd: []string{"httpd", "-f", "-p", "80", "-h", "/" + d.root}})
	}
	return specs, nil
}
