package testimage

import (
	"archive/tar"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The names the upstream e2e specs use for their images
// (k8s.io/kubernetes test/utils/image/manifest.go at the version pinned in
// hack/controlplane/go.mod). Nothing can be pulled here, so E2EImages builds
// stand-ins laid out like the images' Dockerfiles (test/images/*/Dockerfile,
// build/pause/Dockerfile) and hack/importimage imports them under these
// names.
const (
	E2EBusyboxRef    = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	E2EAgnhostRef    = "registry.k8s.io/e2e-test-images/agnhost:2.56"
	E2EPauseRef      = "registry.k8s.io/pause:3.10.1"
	E2ENonewprivsRef = "registry.k8s.io/e2e-test-images/nonewprivs:1.3"
	E2ENonRootRef    = "registry.k8s.io/e2e-test-images/nonroot:1.4"
)

// E2EInputs are the files the e2e images are made of. hack/conformance.sh
// compiles the programs (agnhost and nonewprivs from the k8s.io/kubernetes
// module with CGO_ENABLED=0, pause from its pause.c with gcc -static,
// busybox 1.37.0 from its source with its defconfig, static, as Docker's
// busybox image that upstream's mirrors) and copies agnhost's certificate
// into one directory; E2EInputsIn reads that layout.
type E2EInputs struct {
	Busybox    string // a static busybox; empty: the host's busybox-static
	Agnhost    string // the agnhost program
	Nonewprivs string // test/images/nonewprivs (nnp)
	Pause      string // build/pause/linux/pause.c, statically linked
	TLSCert    string // test/images/agnhost/porter/localhost.crt
	TLSKey     string // test/images/agnhost/porter/localhost.key
}

// E2EInputsIn names the inputs in dir: busybox, agnhost, nnp, pause,
// localhost.crt, localhost.key.
func E2EInputsIn(dir string) E2EInputs {
	return E2EInputs{
		Busybox:    filepath.Join(dir, "busybox"),
		Agnhost:    filepath.Join(dir, "agnhost"),
		Nonewprivs: filepath.Join(dir, "nnp"),
		Pause:      filepath.Join(dir, "pause"),
		TLSCert:    filepath.Join(dir, "localhost.crt"),
		TLSKey:     filepath.Join(dir, "localhost.key"),
	}
}

// defaultPath is the PATH of the busybox and alpine base images.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// E2EImages returns the specs of the e2e images:
//
//   - busybox: like Docker's busybox image (the upstream Dockerfile only
//     mirrors it): every applet of in.Busybox in /bin, the image's users
//     (nobody is 65534) and directories, CMD ["sh"]. Which busybox matters:
//     Debian's busybox-static (1.35 and 1.37 alike) builds an ash that drops
//     environment variables whose names are not shell identifiers, which
//     upstream's 1.37 defconfig keeps and the envFrom specs print.
//   - agnhost: the Dockerfile's layout (/agnhost, /agnhost-2, /uploads,
//     /localhost.crt and .key, user-defined-in-image 1000 in
//     group-defined-in-image 50000, ENTRYPOINT ["/agnhost"], CMD ["pause"])
//     on the busybox layout instead of Alpine with its packages; specs run
//     curl in it, so /usr/bin/curl is a small script that fetches the URL
//     with busybox wget.
//   - pause: /pause, USER 65535:65535, ENTRYPOINT ["/pause"].
//   - nonewprivs: /usr/local/bin/nnp setuid root, CMD ["nnp"], on busybox
//     instead of Alpine.
//   - nonroot: USER 1234 on busybox instead of Debian's base image.
//
// Not built (the NodeConformance specs of test/e2e/common/node do not use
// them): nginx, httpd, and the deliberately unpullable images.
func E2EImages(in E2EInputs) ([]Spec, error) {
	read := func(p string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("testimage: e2e image input: %w", err)
		}
		return b, nil
	}
	agnhost, err := read(in.Agnhost)
	if err != nil {
		return nil, err
	}
	nnp, err := read(in.Nonewprivs)
	if err != nil {
		return nil, err
	}
	pause, err := read(in.Pause)
	if err != nil {
		return nil, err
	}
	cert, err := read(in.TLSCert)
	if err != nil {
		return nil, err
	}
	key, err := read(in.TLSKey)
	if err != nil {
		return nil, err
	}
	bbPath := in.Busybox
	if bbPath == "" {
		bbPath = BusyboxPath
	}
	bb, err := read(bbPath)
	if err != nil {
		return nil, err
	}
	applets, err := busyboxApplets(bbPath)
	if err != nil {
		return nil, err
	}

	base := func(extraUsers, extraGroups string) []File {
		return busyboxLayout(bb, applets, extraUsers, extraGroups)
	}
	home := Dir("home/user-defined-in-image", 0o755) // adduser -D
	home.UID, home.GID = 1000, 1000
	agnhostFiles := append(base("user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
		"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"),
		home,
		Dir("uploads", 0o755),
		Reg("localhost.crt", 0o644, cert),
		Reg("localhost.key", 0o600, key),
		Reg("agnhost", 0o755, agnhost),
		Symlink("agnhost-2", "agnhost"),
		Reg("usr/bin/curl", 0o755, []byte(curlShim)),
	)
	return []Spec{
		{Ref: E2EBusyboxRef, Files: base("", ""), Env: []string{defaultPath}, Cmd: []string{"sh"}},
		{Ref: E2EAgnhostRef, Files: agnhostFiles, Env: []string{defaultPath},
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}},
		{Ref: E2EPauseRef, Files: []File{Reg("pause", 0o755, pause)},
			User: "65535:65535", Entrypoint: []string{"/pause"}},
		{Ref: E2ENonewprivsRef, Files: append(base("", ""),
			Dir("usr/local/bin", 0o755),
			Reg("usr/local/bin/nnp", 0o4755, nnp)),
			Env: []string{defaultPath}, Cmd: []string{"nnp"}},
		{Ref: E2ENonRootRef, Files: base("", ""), Env: []string{defaultPath}, Cmd: []string{"sh"}, User: "1234"},
	}, nil
}

// curlShim stands in for curl in the agnhost image: the specs run
// `curl URL` (lifecycle exec hooks); options are ignored.
const curlShim = `#!/bin/sh
# nodeagent's stand-in for curl (the upstream agnhost image installs Alpine's
# curl): fetches the last non-option argument with busybox wget.
url=
for a in "$@"; do
  case "$a" in
    -*) ;;
    *) url=$a ;;
  esac
done
exec wget -q -O - "$url"
`

// busyboxApplets lists the applets of the busybox at path.
func busyboxApplets(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("testimage: %s --list: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	slices.Sort(applets)
	return applets, nil
}

// busyboxPasswd and busyboxGroup are the accounts of Docker's busybox image.
const (
	busyboxPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`
	busyboxGroup = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nobody:x:65534:
`
)

// busyboxLayout is the file tree of Docker's busybox image: the binary in
// /bin with every applet hard-linked to it, the accounts (plus extra lines)
// and the usual directories.
func busyboxLayout(bb []byte, applets []string, extraUsers, extraGroups string) []File {
	files := []File{
		Dir("bin", 0o755), Dir("dev", 0o755), Dir("etc", 0o755), Dir("home", 0o755),
		Dir("proc", 0o755), Dir("root", 0o700), Dir("sys", 0o755), Dir("tmp", 0o1777),
		Dir("usr", 0o755), Dir("usr/bin", 0o755), Dir("usr/sbin", 0o755),
		Dir("var", 0o755), Dir("var/spool", 0o755), Dir("var/spool/mail", 0o755), Dir("var/www", 0o755),
		Reg("bin/busybox", 0o755, bb),
	}
	for _, a := range applets {
		files = append(files, File{Path: "bin/" + a, Type: tar.TypeLink, Mode: 0o755, Link: "bin/busybox"})
	}
	return append(files,
		Reg("etc/passwd", 0o644, []byte(busyboxPasswd+extraUsers)),
		Reg("etc/group", 0o644, []byte(busyboxGroup+extraGroups)),
	)
}
