package testimage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/internal/testing/localcluster"
)

// Containerd is a private containerd daemon: its root, state and sockets
// live in a temporary directory, the CRI plugin is disabled, and it can be
// killed and started again (to test reconnection). Containers created
// through it should use CgroupParent so that Close can kill whatever is
// left.
//
// The daemon is "containerd" from PATH unless the environment variable
// NODEAGENT_CONTAINERD_BIN (see BinEnv) names another containerd binary by
// absolute path; its directory then comes first in the daemon's PATH so that
// the containerd-shim-runc-v2 next to it is used (hack/build-containerd.sh
// builds such a pair from a current release). NODEAGENT_RUNC_BIN (see
// RuncEnv) likewise puts another runc first in its PATH (hack/build-runc.sh).
type Containerd struct {
	Dir          string
	Address      string // gRPC socket path
	CgroupParent string // unique cgroupfs parent for the containers
	Binary       string // the containerd executable

	env []string // the daemon's environment

	cmd *exec.Cmd
	log *os.File
}

// StartContainerd starts a private containerd for a test (skipping it when
// not root or containerd/runc are missing) and registers its cleanup.
func StartContainerd(t testing.TB) *Containerd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	bin, env, err := daemonBinary()
	if err != nil {
		// Asked for a specific containerd: not finding it is a failure.
		t.Fatal(err)
	}
	if bin == "" {
		t.Skip("containerd not installed")
	}
	if _, err := lookPath("containerd-shim-runc-v2", env); err != nil {
		t.Skipf("containerd-shim-runc-v2 not installed")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc not installed")
	}
	c, err := NewContainerd()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("private containerd %s at %s", c.Binary, c.Address)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("containerd cleanup: %v", err)
		}
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// BinEnv is the environment variable that selects the containerd binary
// (an absolute path) instead of "containerd" from PATH.
const BinEnv = "NODEAGENT_CONTAINERD_BIN"

// RuncEnv is the environment variable that selects the runc binary the
// daemon's shims run (an absolute path) instead of "runc" from PATH.
const RuncEnv = "NODEAGENT_RUNC_BIN"

// Runc is the runc executable the daemon's shims run (first in its PATH).
func (c *Containerd) Runc() (string, error) { return lookPath("runc", c.env) }

// daemonBinary resolves the containerd executable and the environment to run
// it with. bin is "" (and err nil) when no containerd is on PATH and BinEnv is
// unset.
func daemonBinary() (bin string, env []string, err error) {
	bin, env, err = containerdBinary()
	if err != nil || bin == "" {
		return bin, env, err
	}
	runc := os.Getenv(RuncEnv)
	if runc == "" {
		return bin, env, nil
	}
	if !filepath.IsAbs(runc) || filepath.Base(runc) != "runc" {
		return "", nil, fmt.Errorf("%s=%q: must be an absolute path to a file named runc", RuncEnv, runc)
	}
	if _, err := os.Stat(runc); err != nil {
		return "", nil, fmt.Errorf("%s: %w", RuncEnv, err)
	}
	out := make([]string, 0, len(env))
	path := filepath.Dir(runc)
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path += string(filepath.ListSeparator) + p
			continue
		}
		out = append(out, kv)
	}
	return bin, append(out, "PATH="+path), nil
}

// containerdBinary is daemonBinary without RuncEnv.
func containerdBinary() (bin string, env []string, err error) {
	env = os.Environ()
	want := os.Getenv(BinEnv)
	if want == "" {
		bin, err := exec.LookPath("containerd")
		if err != nil {
			return "", env, nil
		}
		return bin, env, nil
	}
	if !filepath.IsAbs(want) {
		return "", nil, fmt.Errorf("%s=%q: must be an absolute path", BinEnv, want)
	}
	if fi, err := os.Stat(want); err != nil {
		return "", nil, fmt.Errorf("%s: %w", BinEnv, err)
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", nil, fmt.Errorf("%s=%q: not an executable file", BinEnv, want)
	}
	dir := filepath.Dir(want)
	if _, err := os.Stat(filepath.Join(dir, "containerd-shim-runc-v2")); err != nil {
		return "", nil, fmt.Errorf("%s: no containerd-shim-runc-v2 next to it: %w", BinEnv, err)
	}
	path := dir
	if p := os.Getenv("PATH"); p != "" {
		path += string(filepath.ListSeparator) + p
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return want, append(out, "PATH="+path), nil
}

// lookPath finds an executable in the PATH of env.
func lookPath(name string, env []string) (string, error) {
	var path string
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

// NewContainerd prepares (but does not start) a private containerd, using
// the binary BinEnv selects.
func NewContainerd() (*Containerd, error) {
	bin, env, err := daemonBinary()
	if err != nil {
		return nil, err
	}
	if bin == "" {
		return nil, errors.New("containerd not found in PATH")
	}
	// Short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "nactrd")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c := &Containerd{
		Dir:          dir,
		Address:      filepath.Join(dir, "c.sock"),
		CgroupParent: "/nodeagent-test-" + hex.EncodeToString(b),
		Binary:       bin,
		env:          env,
	}
	cfg := localcluster.ContainerdConfig(filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.Address)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// Pid is the daemon's process ID (0 when not running).
func (c *Containerd) Pid() int {
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// starts runs exec.Cmd.Start on one OS thread that lives as long as the
// process: Pdeathsig fires when the *thread* that forked the child exits,
// and Go lets a thread exit when a goroutine that locked it ends (as
// internal/netns does on purpose), which would kill the daemon mid-test.
var starts = make(chan startReq)

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

var startThreadOnce sync.Once

// StartOnStableThread runs cmd.Start on an OS thread that lives as long as
// the process, so that the child's Pdeathsig fires only when the process
// ends (see starts).
func StartOnStableThread(cmd *exec.Cmd) error {
	startThreadOnce.Do(func() {
		go func() {
			goruntime.LockOSThread() // never unlocked: the thread never exits
			for r := range starts {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starts <- startReq{cmd: cmd, done: done}
	return <-done
}

// Start starts the daemon (again) and waits until its socket accepts
// connections.
func (c *Containerd) Start() error {
	if c.cmd != nil {
		return errors.New("containerd already running")
	}
	log, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Binary, "--config", filepath.Join(c.Dir, "config.toml"))
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := StartOnStableThread(cmd); err != nil {
		log.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	c.cmd, c.log = cmd, log
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("unix", c.Address)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not come up: %w (log %s)", err, log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the daemon with SIGKILL (a crash; shims and containers keep
// running) and waits for it to exit.
func (c *Containerd) Kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	c.log.Close()
	c.cmd = nil
	_ = os.Remove(c.Address)
}

// Close kills the containers' processes and shims, stops the daemon,
// unmounts and removes everything.
func (c *Containerd) Close() error {
	// The containers' processes and their shims outlive containerd.
	killCgroup(c.CgroupParent)
	killShims(c.Address)
	if c.cmd != nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
		c.log.Close()
		c.cmd = nil
	}
	unmountUnder(c.Dir)
	removeCgroup(c.CgroupParent)
	return os.RemoveAll(c.Dir)
}

// cgroupRoots are the mounted cgroup hierarchies (v1 controllers and v2).
func cgroupRoots() []string {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	return mountinfo.CgroupMountPoints(ms)
}

func killCgroup(parent string) {
	for _, root := range cgroupRoots() {
		dir := filepath.Join(root, parent)
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, l := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(l); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

func removeCgroup(parent string) {
	for _, root := range cgroupRoots() {
		dir := filepath.Join(root, parent)
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children first
			for try := 0; try < 50; try++ {
				if err := syscall.Rmdir(dirs[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

func killShims(address string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == address {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(dir string) {
	ms, err := mountinfo.Read()
	if err != nil {
		return
	}
	mps := mountinfo.MountPointsUnder(ms, dir)
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// ExitStatusSurvivesRestart reports whether a containerd of the given version
// (as its Version API reports it, e.g. "1.6.20" or "v2.4.2") keeps a stopped
// task, and so its exit status, when the daemon restarts. containerd 1.x
// does; 2.x reaps shims without running processes while it loads them, so
// an exit nobody recorded before the restart is lost.
func ExitStatusSurvivesRestart(version string) bool {
	return strings.HasPrefix(strings.TrimPrefix(version, "v"), "1.")
}
