// Command importimage imports the busybox test image (internal/testimage,
// docker.io/nodeagent/busybox:test, built from the host's busybox-static)
// into a containerd namespace, so that pods can use it without a registry.
// `make run` (hack/run.sh) runs it against the local cluster's containerd.
//
//	importimage --address ADDR [--namespace NS]
//
// ADDR is containerd's socket (a path or a unix:// URL); NS defaults to
// k8s.io, the agent's default containerRuntimeNamespace. Importing an image
// that is already there is harmless. It prints the image's reference and ID.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodeagent/nodeagent/internal/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

func main() {
	address := flag.String("address", "", "containerd socket: a path or a unix:// URL (required)")
	namespace := flag.String("namespace", runtime.DefaultNamespace, "containerd namespace to import into")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: importimage --address ADDR [--namespace NS] [--timeout D]")
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
}

// run imports the test image into namespace of the containerd at address
// and returns it as containerd now has it.
func run(ctx context.Context, address, namespace string) (runtime.Image, error) {
	if address == "" {
		return runtime.Image{}, errors.New("--address is required")
	}
	// Say what is wrong at once rather than after the dial timeout.
	sock := strings.TrimPrefix(address, "unix://")
	if !filepath.IsAbs(sock) {
		return runtime.Image{}, fmt.Errorf("--address %q: must be an absolute socket path or a unix:// URL", address)
	}
	if fi, err := os.Stat(sock); err != nil {
		return runtime.Image{}, fmt.Errorf("--address %q: no containerd socket there: %w", address, err)
	} else if fi.Mode().Type() != fs.ModeSocket {
		return runtime.Image{}, fmt.Errorf("--address %q: not a socket (mode %s)", address, fi.Mode())
	}
	rt, err := runtime.New(runtime.Options{
		Address:   address,
		Namespace: namespace,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
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
