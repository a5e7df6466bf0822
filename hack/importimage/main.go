// Command importimage imports the busybox test image (internal/testing/testimage,
// docker.io/nodeagent/busybox:test, built from the host's busybox-static)
// into a containerd namespace, so that pods can use it without a registry.
// `make run` (hack/run.sh) runs it against the local cluster's containerd.
//
//	importimage --address ADDR [--namespace NS] [--e2e DIR]
//
// ADDR is containerd's socket (a path or a unix:// URL); NS defaults to
// k8s.io, the agent's default containerRuntimeNamespace. With --e2e it also
// imports the upstream e2e test images under the names the specs use
// (testimage.E2EImages: busybox, agnhost, pause, nonewprivs, nonroot), made
// of the programs in DIR (hack/conformance.sh compiles them). Importing an
// image that is already there is harmless. It prints each image's reference
// and ID. With --csi it also imports CSIImageRef, the stand-in CSI
// host-path driver and its registrar (internal/testing/csihostpath) with
// kubernetes-csi's external-provisioner, external-resizer and
// external-attacher (hack/build-csi-sidecars.sh), made of the programs
// csihostpath, csi-provisioner, csi-resizer and csi-attacher in DIR
// (hack/conformance.sh builds them for the upstream storage specs).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

func main() {
	address := flag.String("address", "", "containerd socket: a path or a unix:// URL (required)")
	namespace := flag.String("namespace", runtime.DefaultNamespace, "containerd namespace to import into")
	e2e := flag.String("e2e", "", "also import the upstream e2e test images, made of the programs in this directory: agnhost, nnp, pause, localhost.crt, localhost.key")
	csi := flag.String("csi", "", "also import "+CSIImageRef+", made of the programs in this directory: csihostpath, csi-provisioner, csi-resizer, csi-attacher")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: importimage --address ADDR [--namespace NS] [--e2e DIR] [--timeout D]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "importimage: unexpected arguments: %v\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	img, err := run(ctx, *address, *namespace)
	if err != nil {
		fmt.Fprintf(os.Stderr, "importimage: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", testimage.Ref, img.ID)
	var specs []testimage.Spec
	if *e2e != "" {
		s, err := e2eSpecs(*e2e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "importimage: %v\n", err)
			os.Exit(1)
		}
		specs = append(specs, s...)
	}
	if *csi != "" {
		s, err := csiImage(*csi)
		if err != nil {
			fmt.Fprintf(os.Stderr, "importimage: --csi %s: %v\n", *csi, err)
			os.Exit(1)
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 {
		return
	}
	imgs, err := importSpecs(ctx, *address, *namespace, specs)
	for _, img := range imgs {
		fmt.Printf("%s %s\n", img.Ref, img.ID)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "importimage: %v\n", err)
		os.Exit(1)
	}
}

// CSIImageRef is the image of the stand-in CSI driver and registrar and of
// the sidecars of its controller; its entrypoint is the driver
// (-mode=driver, controller or registrar); /bin/csi-provisioner,
// /bin/csi-resizer and /bin/csi-attacher are external-provisioner,
// external-resizer and external-attacher (hack/csi-sidecars/controller.yaml
// runs them); /usr/sbin/mke2fs (the host's, with its libraries) formats
// the driver's ext3 and ext4 volumes.
const CSIImageRef = "docker.io/nodeagent/csihostpath:conformance"

// csiImage lays out CSIImageRef from the programs in dir.
func csiImage(dir string) (testimage.Spec, error) {
	files := []testimage.File{
		testimage.Dir("bin", 0o755), testimage.Dir("tmp", 0o1777), testimage.Dir("dev", 0o755),
		testimage.Dir("proc", 0o755), testimage.Dir("sys", 0o755), testimage.Dir("etc", 0o755),
	}
	for _, p := range []string{"csihostpath", "csi-provisioner", "csi-resizer", "csi-attacher"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return testimage.Spec{}, err
		}
		files = append(files, testimage.Reg("bin/"+p, 0o755, b))
	}
	// The driver formats volumes with an fsType (ext3, ext4) with mke2fs,
	// as a disk driver's image carries e2fsprogs: the host's, with the
	// shared libraries it links and its configuration.
	mk, err := hostProgram(mke2fs)
	if err != nil {
		return testimage.Spec{}, fmt.Errorf("%s (e2fsprogs, hack/ensure-deps.sh): %w", mke2fs, err)
	}
	files = append(files, mk...)
	if b, err := os.ReadFile("/etc/mke2fs.conf"); err == nil {
		files = append(files, testimage.Reg("etc/mke2fs.conf", 0o644, b))
	}
	// mke2fs checks that the device is not mounted in the mount table.
	files = append(files, testimage.Symlink("etc/mtab", "/proc/self/mounts"))
	return testimage.Spec{Ref: CSIImageRef, Files: files, Entrypoint: []string{"/bin/csihostpath"}}, nil
}

// mke2fs is where the host has it, and where the image has it
// (internal/testing/csihostpath looks there).
const mke2fs = "/usr/sbin/mke2fs"

// hostProgram is the host's program at path with the shared libraries and
// the dynamic loader ldd lists for it, each at its path (with the
// directories above), for an image that has no libraries of its own.
func hostProgram(path string) ([]testimage.File, error) {
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", path, err)
	}
	paths := []string{path}
	for _, l := range strings.Split(string(out), "\n") {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"; not linux-vdso.
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			paths = append(paths, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			paths = append(paths, f[0])
		}
	}
	var files []testimage.File
	dirs := map[string]bool{}
	for _, p := range paths {
		var parents []string
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if !dirs[parents[i]] {
				dirs[parents[i]] = true
				files = append(files, testimage.Dir(strings.TrimPrefix(parents[i], "/"), 0o755))
			}
		}
		b, err := os.ReadFile(p) // through symlinks: the library itself
		if err != nil {
			return nil, err
		}
		files = append(files, testimage.Reg(strings.TrimPrefix(p, "/"), 0o755, b))
	}
	return files, nil
}

// run imports the test image into namespace of the containerd at address
// and returns it as containerd now has it.
func run(ctx context.Context, address, namespace string) (runtime.Image, error) {
	rt, err := connect(ctx, address, namespace)
	if err != nil {
		return runtime.Image{}, err
	}
	defer rt.Close()
	if err := testimage.Import(ctx, rt); err != nil {
		return runtime.Image{}, fmt.Errorf("into namespace %q at %s: %w", namespace, address, err)
	}
	img, err := rt.GetImage(ctx, testimage.Ref)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("imported %s, but cannot find it: %w", testimage.Ref, err)
	}
	return img, nil
}

// imported is an image as containerd has it after the import, by the
// reference it was imported under.
type imported struct {
	Ref string
	runtime.Image
}

// e2eSpecs lays out the e2e test images from the programs in dir.
func e2eSpecs(dir string) ([]testimage.Spec, error) {
	specs, err := testimage.E2EImages(testimage.E2EInputsIn(dir))
	if err != nil {
		return nil, fmt.Errorf("--e2e %s: %w", dir, err)
	}
	return specs, nil
}

// runE2E builds the e2e test images from the programs in dir and imports
// them into namespace (importSpecs).
func runE2E(ctx context.Context, address, namespace, dir string) ([]imported, error) {
	specs, err := e2eSpecs(dir)
	if err != nil {
		return nil, err
	}
	return importSpecs(ctx, address, namespace, specs)
}

// importSpecs builds the images of specs and imports them into
// namespace, one at a time; it returns those imported before any error.
func importSpecs(ctx context.Context, address, namespace string, specs []testimage.Spec) ([]imported, error) {
	rt, err := connect(ctx, address, namespace)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	var out []imported
	for _, s := range specs {
		a, err := s.Archive()
		if err != nil {
			return out, err
		}
		if _, err := rt.ImportImage(ctx, bytes.NewReader(a)); err != nil {
			return out, fmt.Errorf("%s into namespace %q at %s: %w", s.Ref, namespace, address, err)
		}
		img, err := rt.GetImage(ctx, s.Ref)
		if err != nil {
			return out, fmt.Errorf("imported %s, but cannot find it: %w", s.Ref, err)
		}
		out = append(out, imported{Ref: s.Ref, Image: img})
	}
	return out, nil
}

// connect checks address and connects to containerd's namespace there.
// connect dials containerd; each call to it may take what is left of
// ctx's deadline (--timeout): an import of the CSI image (some 200 MB of
// programs) takes longer than the runtime's default 10 s on a loaded
// machine.
func connect(ctx context.Context, address, namespace string) (*runtime.Runtime, error) {
	if address == "" {
		return nil, errors.New("--address is required")
	}
	// Say what is wrong at once rather than after the dial timeout.
	sock := strings.TrimPrefix(address, "unix://")
	if !filepath.IsAbs(sock) {
		return nil, fmt.Errorf("--address %q: must be an absolute socket path or a unix:// URL", address)
	}
	if fi, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("--address %q: no containerd socket there: %w", address, err)
	} else if fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("--address %q: not a socket (mode %s)", address, fi.Mode())
	}
	return runtime.New(runtime.Options{
		Address:     address,
		Namespace:   namespace,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		CallTimeout: callTimeout(ctx),
	})
}

func callTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Second)
	}
	return 0 // the runtime's default
}
