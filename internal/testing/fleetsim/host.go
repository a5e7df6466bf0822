package fleetsim

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeagent/nodeagent/nodestatus"
)

// Simulated host: a production-like worker (16 CPUs, 64 GiB, 200 GB
// nodefs), shared by every simulated node of a process. Its facts do not
// change during a run, so a Node's status changes only when the agent's own
// code decides it did.
const (
	simCPUs      = 16
	simMemKiB    = 64 << 20
	simFSBytes   = 200_000_000_000
	simFSFree    = 120_000_000_000
	simFSInodes  = 13_000_000
	simInodeFree = 12_000_000
)

// NewHost lays out the files nodestatus.Host reads below dir and returns a
// Host rooted there, with a fixed kernel and filesystem.
func NewHost(dir string) (*nodestatus.Host, error) {
	files := map[string]string{
		"etc/machine-id":                 "5f1c3a9e0b6d4e27a8c1f0e2d3b4a596\n",
		"sys/class/dmi/id/product_uuid":  "ec2a9f4e-1b2c-4d3e-8f90-a1b2c3d4e5f6\n",
		"proc/sys/kernel/random/boot_id": "0e9d8c7b-6a59-4837-a261-5f4e3d2c1b0a\n",
		"proc/sys/kernel/osrelease":      "6.1.0-28-cloud-amd64\n",
		"etc/os-release":                 "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n",
		"proc/meminfo":                   fmt.Sprintf("MemTotal: %d kB\nMemFree: %d kB\nInactive(file): %d kB\n", simMemKiB, simMemKiB/2, simMemKiB/8),
		"sys/devices/system/cpu/online":  fmt.Sprintf("0-%d\n", simCPUs-1),
		"proc/sys/kernel/pid_max":        "4194304\n",
		"proc/sys/kernel/threads-max":    "514572\n",
		"proc/loadavg":                   "0.52 0.48 0.45 2/612 123456\n",
		"sys/kernel/mm/hugepages/.keep":  "",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return &nodestatus.Host{
		Root:  dir,
		Uname: func() (string, error) { return "6.1.0-28-cloud-amd64", nil },
		Statfs: func(string) (nodestatus.FSStats, error) {
			return nodestatus.FSStats{CapacityBytes: simFSBytes, AvailableBytes: simFSFree, Inodes: simFSInodes, InodesFree: simInodeFree}, nil
		},
	}, nil
}
