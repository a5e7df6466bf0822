package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// `kubectl run -i --rm --restart=Never` through the real API server: the
// container gets stdin (stdinOnce), reads what kubectl pipes in, exits at
// its end, and kubectl prints its output and deletes the pod.
func TestKubectlRunInteractive(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-run"
	root, _ := testenv.RepoRoot()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(root, "_output", "bin", "kubectl"), "--kubeconfig", a.env.AdminKubeconfig,
		"run", name, "-i", "--rm", "--restart=Never", "--image="+testimage.Ref, "-n", "default",
		fmt.Sprintf(`--overrides={"spec":{"nodeName":%q,"automountServiceAccountToken":false}}`, a.node),
		"--", "sh", "-c", `while read l; do echo "got $l"; done; echo "stdin closed"`)
	cmd.Stdin = strings.NewReader("hello\nworld\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl run -i: %v\nstdout %q\nstderr %q", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "got hello\ngot world\nstdin closed\n") {
		t.Errorf("kubectl run -i: stdout %q, stderr %q", out.String(), errb.String())
	}
	if !strings.Contains(out.String()+errb.String(), fmt.Sprintf("pod %q deleted", name)) {
		t.Errorf("kubectl run --rm did not delete the pod: stdout %q, stderr %q", out.String(), errb.String())
	}
}

// `kubectl attach -i` to a running container with stdin (no stdinOnce):
// lines sent reach it, its answers come back, and stdin stays open for the
// next session when kubectl goes away.
func TestKubectlAttachStdin(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-attach"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: echo
    image: %s
    stdin: true
    command: ["sh", "-c", "while read l; do echo \"got $l\"; echo \"err $l\" >&2; done; echo eof; sleep 3600"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "running", running)
	root, _ := testenv.RepoRoot()
	session := func(line string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, filepath.Join(root, "_output", "bin", "kubectl"), "--kubeconfig", a.env.AdminKubeconfig,
			"attach", "-i", name, "-c", "echo")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW := io.Pipe()
		cmd.Stdout = outW
		var errb safeBuffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(outR)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// kubectl attaches asynchronously: repeat the line until an
		// answer shows the session is up.
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		for {
			if _, err := io.WriteString(in, line+"\n"); err != nil {
				t.Fatalf("write to kubectl attach: %v (%s)", err, errb.String())
			}
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl attach ended: %s", errb.String())
				}
				if l != "got "+line {
					t.Fatalf("kubectl attach -i: got line %q, want %q", l, "got "+line)
				}
				// stderr comes back on its own stream.
				waitFor(t, 10*time.Second, func() bool { return strings.Contains(errb.String(), "err "+line) }, "stderr line")
				return
			case <-tick.C:
			case <-deadline:
				t.Fatalf("no answer from kubectl attach -i: stderr %q", errb.String())
			}
		}
	}
	session("one")
	// The agent dies (SIGKILL) and so does the container's log writer (as
	// when systemd stops the agent's cgroup); the restarted agent starts a
	// new writer, and the container's stdin is still open: a second
	// session works (the first one's end did not close stdin either).
	a.stop(syscall.SIGKILL)
	pod, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	killed := killStdioLoggers(t, filepath.Join(a.rootDir(), "pods", string(pod.UID), "stdio"))
	if killed != 1 {
		t.Fatalf("killed %d log writers, want 1", killed)
	}
	a.start()
	a.waitReady(ctx, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool {
		_, err := kubectlOut(t, a.env, "logs", name, "-c", "echo", "--tail=1")
		return err == nil
	}, "the node API after the restart")
	session("two")
	p := a.waitPod(ctx, name, 10*time.Second, "running", running)
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("container restarted: %+v", p.Status.ContainerStatuses[0])
	}
}

// A terminal through pods/attach with client-go's SPDY and WebSocket
// executors (as `kubectl attach -it`): input is echoed, output is one
// stream, resizes reach the terminal.
func TestAttachTTYResize(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-tty"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: term
    image: %s
    stdin: true
    tty: true
    command: ["sh", "-c", "while read l; do echo \"size $(stty size) got $l\"; done"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "running", running)
	req := a.env.Admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "term", Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec)
	for i, proto := range []string{"spdy", "websocket"} {
		t.Run(proto, func(t *testing.T) {
			var exe remotecommand.Executor
			var err error
			if proto == "spdy" {
				exe, err = remotecommand.NewSPDYExecutor(a.env.AdminConfig, "POST", req.URL())
			} else {
				exe, err = remotecommand.NewWebSocketExecutor(a.env.AdminConfig, "GET", req.URL().String())
			}
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			var out safeBuffer
			sizes := &sizeQueue{c: make(chan *remotecommand.TerminalSize, 1)}
			width := uint16(81 + i)
			sizes.c <- &remotecommand.TerminalSize{Width: width, Height: 23}
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- exe.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: &out, Tty: true, TerminalSizeQueue: sizes})
			}()
			want := fmt.Sprintf("size 23 %d got %s\r\n", width, proto)
			waitFor(t, 20*time.Second, func() bool {
				_, _ = io.WriteString(inW, proto+"\n")
				time.Sleep(200 * time.Millisecond)
				return strings.Contains(out.String(), want)
			}, "answer "+want)
			cancel()
			_ = inW.Close()
			close(sizes.c)
			<-done
			// The terminal echoes input: "<proto>\r\n".
			if !strings.Contains(out.String(), proto+"\r\n") {
				t.Errorf("no echo in %q", out.String())
			}
		})
	}
}

type sizeQueue struct {
	c chan *remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.c
	if !ok {
		return nil
	}
	return s
}

type safeBuffer = testlog.Buffer

func waitFor(t *testing.T, within time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killStdioLoggers SIGKILLs the processes that hold a lock file of dir (the
// log writers of containers with stdin) and returns how many there were.
func killStdioLoggers(t *testing.T, dir string) int {
	t.Helper()
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	n := 0
	for _, l := range locks {
		st, err := os.Stat(l)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			fst, err := os.Stat(fd)
			if err != nil || !os.SameFile(st, fst) {
				continue
			}
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				n++
			}
		}
	}
	return n
}

// streamingConnectionIdleTimeout: an exec session through the API server
// that carries nothing for the agent's idle timeout is closed, while the
// command still runs; output before it arrives.
func TestExecStreamIdleTimeout(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "streamingConnectionIdleTimeout: 2s\n")
	ctx := context.Background()
	a.waitKubeletPort(ctx)
	name := a.node + "-idle"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, name, 60*time.Second, "running", running)
	req := a.env.Admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"sh", "-c", "echo hi; sleep 60; echo late"}, Stdout: true}, scheme.ParameterCodec)
	exe, err := remotecommand.NewSPDYExecutor(a.env.AdminConfig, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	var out safeBuffer
	start := time.Now()
	err = exe.StreamWithContext(sctx, remotecommand.StreamOptions{Stdout: &out})
	took := time.Since(start)
	t.Logf("exec ended after %v: %v, output %q", took, err, out.String())
	if sctx.Err() != nil || took > 30*time.Second {
		t.Fatalf("an idle exec session lasted %v with a 2s idle timeout", took)
	}
	if took < 2*time.Second || out.String() != "hi\n" {
		t.Errorf("session ended after %v with output %q; want it idle 2s after \"hi\"", took, out.String())
	}
}
