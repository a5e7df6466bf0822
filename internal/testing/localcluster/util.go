package localcluster

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// parseKubeconfigCreds extracts the embedded CA and client credentials of the
// kubeconfigs this package writes.
func parseKubeconfigCreds(kc []byte) (caPEM, certPEM, keyPEM []byte, err error) {
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				CA string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Cert string `json:"client-certificate-data"`
				Key  string `json:"client-key-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(kc, &cfg); err != nil {
		return nil, nil, nil, err
	}
	if len(cfg.Clusters) == 0 || len(cfg.Users) == 0 {
		return nil, nil, nil, errors.New("kubeconfig has no cluster or user")
	}
	dec := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	return dec(cfg.Clusters[0].Cluster.CA), dec(cfg.Users[0].User.Cert), dec(cfg.Users[0].User.Key), nil
}

// cleanupContainerd kills the shims of our private containerd with the
// containers below them, and unmounts what they left under its directories.
// The host's containerd, if any, is left alone: its shims name another address.
func cleanupContainerd(s *State) {
	var shims []int
	procs, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if pp := ppid(pid); pp > 0 {
			children[pp] = append(children[pp], pid)
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == s.ContainerdAddress {
				shims = append(shims, pid)
			}
		}
	}
	var kill func(pid int)
	kill = func(pid int) {
		for _, c := range children[pid] {
			kill(c)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range shims {
		kill(pid)
	}
	if len(shims) > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	unmountBelow(filepath.Join(s.Dir, "containerd"))
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// unmountBelow lazily unmounts every mount point below dir, deepest first.
func unmountBelow(dir string) {
	ms, err := mountinfo.Read()
	if err != nil {
		return
	}
	mounts := mountinfo.MountPointsUnder(ms, dir)
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}
