package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// TestMain lets the test binary act as the container log writer (as the
// agent binary does) and as a throwaway "agent" process that starts a
// container and is then SIGKILLed.
func TestMain(m *testing.M) {
	if crilog.IsLoggerInvocation(os.Args[1:]) {
		os.Exit(crilog.RunLogger(os.Args[1:], os.Stderr))
	}
	if os.Getenv(agentEnv) != "" {
		os.Exit(startAndHang())
	}
	os.Exit(m.Run())
}

const agentEnv = "NODEAGENT_TEST_LOG_AGENT"

// floodCommand writes lines numbered 0..n-1 of 130 bytes each.
func floodCommand(n int) []string {
	return []string{"busybox", "awk", fmt.Sprintf(`BEGIN { for (i = 0; i < %d; i++) printf "%%08d %%0120d\n", i, 0 }`, n)}
}

// startAndHang is the throwaway agent: it starts one flooding container
// with the shim-run log writer, prints its ID and waits to be killed.
func startAndHang() int {
	var args struct{ Address, CgroupParent, LogPath, Logger string }
	_, err := fmt.Sscan(os.Getenv(agentEnv), &args.Address, &args.CgroupParent, &args.LogPath, &args.Logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rt, err := runtime.New(runtime.Options{
		Address: args.Address, CgroupParent: args.CgroupParent, CallTimeout: 20 * time.Second,
		ContainerLogger: args.Logger, LogRotation: crilog.Rotation{MaxSize: 10 << 20, MaxFiles: 10},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := spec("killed-agent", "flood", floodCommand(floodLines)...)
	s.LogPath = args.LogPath
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, s)
	if err == nil {
		err = rt.StartContainer(ctx, id)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(id)
	select {}
}

// floodLines × 130 bytes ≈ 52 MB (50 MiB).
const floodLines = 404000

// lastFloodRecord ends the log of floodCommand(floodLines): the whole
// record, newline included. Its prefix alone can be read before the rest
// of the write that holds it (a read racing the writer's append sees a
// torn record), and checkLines then fails on the short content.
var lastFloodRecord = fmt.Sprintf(" stdout F %08d %0120d\n", floodLines-1, 0)

func waitExited(t *testing.T, rt *runtime.Runtime, id string, within time.Duration) runtime.Container {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := rt.InspectContainer(context.Background(), id)
		if err == nil && c.State == runtime.StateExited {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not finish within %s: %+v %v", id, within, c, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logFiles returns the rotated files then the live one.
func logFiles(t *testing.T, p string) []string {
	t.Helper()
	r, err := crilog.RotatedFiles(p)
	if err != nil {
		t.Fatal(err)
	}
	return append(r, p)
}

// checkLines reads CRI records across files and checks they are the lines
// from..n-1 of floodCommand, in order, none missing; it returns from.
func checkLines(t *testing.T, files []string, n int) int {
	t.Helper()
	next, first := -1, -1
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			r, err := crilog.ParseRecord(sc.Bytes())
			if err != nil || r.Stream != crilog.Stdout || r.Partial {
				t.Fatalf("%s: record %q: %v", f, sc.Text(), err)
			}
			var i int
			if _, err := fmt.Sscanf(string(r.Content), "%08d", &i); err != nil || len(r.Content) != 129 {
				t.Fatalf("%s: content %q", f, r.Content)
			}
			if next >= 0 && i != next {
				t.Fatalf("%s: line %d after line %d: lines lost", f, i, next-1)
			}
			if first < 0 {
				first = i
			}
			next = i + 1
		}
		fh.Close()
	}
	if next != n {
		t.Fatalf("last line %d, want %d", next-1, n-1)
	}
	return first
}

// A container writing 50 MiB through the shim-run writer keeps at most
// containerLogMaxFiles files of at most containerLogMaxSize, the newest
// lines complete.
func TestContainerLogRotation(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rot := crilog.Rotation{MaxSize: crilog.DefaultMaxSize, MaxFiles: crilog.DefaultMaxFiles}
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogger, o.LogRotation = self, rot })
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "logs", "default_p_uid", "flood", "0.log")
	s := spec("rotation", "flood", floodCommand(floodLines)...)
	s.LogPath = logPath
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitExited(t, rt, id, 3*time.Minute)
	t.Logf("50 MiB written in %s, exit %d", time.Since(start), c.ExitCode)
	if c.ExitCode != 0 {
		t.Fatalf("exit code %d", c.ExitCode)
	}
	// The writer may still drain the pipe after the exit: wait for the
	// last line.
	files := logFiles(t, logPath)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), lastFloodRecord) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	files = logFiles(t, logPath)
	if len(files) != rot.MaxFiles {
		t.Errorf("%d files %q, want %d", len(files), files, rot.MaxFiles)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > rot.MaxSize {
			t.Errorf("%s: %d bytes > %d", f, st.Size(), rot.MaxSize)
		}
	}
	first := checkLines(t, files, floodLines)
	t.Logf("kept lines %d..%d in %d files", first, floodLines-1, len(files))
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// The agent that started a container is SIGKILLed while the container
// writes: the container is not blocked and no line is lost.
func TestContainerLogSurvivesAgentKill(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rt, cd := newRuntime(t)
	logPath := filepath.Join(t.TempDir(), "logs", "default_k_uid", "flood", "0.log")
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+strings.Join([]string{cd.Address, cd.CgroupParent, logPath, self}, " "))
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var id string
	if _, err := fmt.Fscan(out, &id); err != nil {
		t.Fatalf("agent did not start the container: %v", err)
	}
	// Kill the agent once the container is writing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(logPath); err == nil && st.Size() > 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container wrote nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("agent killed")
	c := waitExited(t, rt, id, 3*time.Minute)
	if c.ExitCode != 0 {
		t.Fatalf("exit code %d", c.ExitCode)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), lastFloodRecord) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	files := logFiles(t, logPath)
	if first := checkLines(t, files, floodLines); first != 0 {
		t.Fatalf("first line %d, want 0 (10 files of 10 MiB hold all)", first)
	}
	if len(files) < 5 {
		t.Errorf("only %d files: no rotation happened", len(files))
	}
	_ = rt.RemoveContainer(context.Background(), id)
}
