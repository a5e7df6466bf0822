// Command testimage writes the busybox test image (internal/testing/testimage, the
// image the e2e tests run, referenced as docker.io/nodeagent/busybox:test)
// as an OCI image layout tar archive to the file named by its argument, for
// `ctr images import` in hack/test-systemd.sh's container, which has its own
// containerd and cannot pull.
package main

import (
	"fmt"
	"os"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testimage FILE")
		os.Exit(2)
	}
	b, err := testimage.Archive()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
}
