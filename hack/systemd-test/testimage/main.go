// Command testimage writes the busybox test image (internal/testing/testimage, the
// image the e2e tests run, referenced as docker.io/nodeagent/busybox:test)
// as an OCI image layout tar archive to the file named by its argument, for
// `ctr images import` in hack/test-systemd.sh's container and in
// hack/test-vm.sh's guest, which have their own containerd and cannot pull.
//
//	testimage FILE
//	testimage --e2e DIR OUTDIR
//
// With --e2e it writes the upstream e2e test images instead
// (testimage.E2EImages, made of the programs in DIR, which
// `hack/conformance.sh --build-images-only` prints), one archive per image
// in OUTDIR (e2e-0.tar, e2e-1.tar, ...), each imported under the name the
// specs use: hack/test-vm.sh's long form imports them into the guest.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 2:
		var b []byte
		b, err = testimage.Archive()
		if err == nil {
			err = os.WriteFile(os.Args[1], b, 0o644)
		}
	case len(os.Args) == 4 && os.Args[1] == "--e2e":
		err = writeE2E(os.Args[2], os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "usage: testimage FILE | testimage --e2e DIR OUTDIR")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
}

func writeE2E(dir, out string) error {
	specs, err := testimage.E2EImages(testimage.E2EInputsIn(dir))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for i, s := range specs {
		b, err := s.Archive()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("e2e-%d.tar", i)), b, 0o644); err != nil {
			return err
		}
		fmt.Println(s.Ref)
	}
	return nil
}
