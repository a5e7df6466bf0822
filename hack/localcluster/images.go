package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// nodeImages returns what imports a multi-node cluster's images into a
// node's containerd: the busybox test image, the e2e images (made of the
// programs in e2eDir, when set) and the add-ons' (localcluster's
// addons.go), made of the programs in binDir; with standIns (a directory
// laid out for testimage.E2EStandIns), every image of the full suite.
func nodeImages(binDir, e2eDir, standIns string) func(ctx context.Context, address string) error {
	return func(ctx context.Context, address string) error {
		specs, err := addonImages(binDir)
		if err != nil {
			return err
		}
		if e2eDir != "" {
			e2e := testimage.E2EImages
			if standIns != "" {
				e2e = func(in testimage.E2EInputs) ([]testimage.Spec, error) { return testimage.E2EStandIns(in, standIns) }
			}
			more, err := e2e(testimage.E2EInputsIn(e2eDir))
			if err != nil {
				return err
			}
			specs = append(specs, more...)
		}
		rt, err := runtime.New(runtime.Options{Address: "unix://" + address, Namespace: runtime.DefaultNamespace, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := testimage.Import(ctx, rt); err != nil {
			return err
		}
		for _, sp := range specs {
			a, err := sp.Archive()
			if err != nil {
				return err
			}
			if _, err := rt.ImportImage(ctx, bytes.NewReader(a)); err != nil {
				return fmt.Errorf("importing %s: %w", sp.Ref, err)
			}
		}
		return nil
	}
}

// hostToolsLayout is the part of an add-on image that lets the host's /usr
// (mounted at /usr) work: merged-/usr symlinks and mount points.
func hostToolsLayout() []testimage.File {
	return []testimage.File{
		testimage.Dir("usr", 0o755), testimage.Dir("etc", 0o755), testimage.Dir("etc/alternatives", 0o755),
		testimage.Dir("run", 0o755), testimage.Dir("tmp", 0o1777), testimage.Dir("var", 0o755), testimage.Dir("var/run", 0o755),
		testimage.Symlink("bin", "usr/bin"), testimage.Symlink("sbin", "usr/sbin"),
		testimage.Symlink("lib", "usr/lib"), testimage.Symlink("lib64", "usr/lib64"),
	}
}

// addonImages are the add-ons' images, each its program at / on
// hostToolsLayout. CoreDNS is left out when binDir has none.
func addonImages(binDir string) ([]testimage.Spec, error) {
	var specs []testimage.Spec
	for _, a := range []struct{ ref, bin string }{
		{localcluster.RouteAgentImage, "routeagent"},
		{localcluster.KubeProxyImage, "kube-proxy"},
		{localcluster.CoreDNSImage, "coredns"},
	} {
		data, err := os.ReadFile(filepath.Join(binDir, a.bin))
		if os.IsNotExist(err) && a.bin == "coredns" {
			continue
		}
		if err != nil {
			return nil, err
		}
		files := append(hostToolsLayout(), testimage.Reg(a.bin, 0o755, data))
		specs = append(specs, testimage.Spec{Ref: a.ref, Files: files, Entrypoint: []string{"/" + a.bin},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	}
	return specs, nil
}
