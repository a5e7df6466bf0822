package runtime_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
)

// Exec runs a command in a running container: stdin to EOF, stdout and
// stderr apart, the exit code; with a TTY, a terminal.
func TestExec(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, spec("exec", "main", "sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, id, runtime.StateRunning)
	var out, errb bytes.Buffer
	code, err := rt.Exec(ctx, id, runtime.ExecOptions{
		Cmd:   []string{"sh", "-c", "cat; echo to-stderr >&2; exit 7"},
		Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errb,
	})
	if err != nil || code != 7 || out.String() != "from stdin\n" || errb.String() != "to-stderr\n" {
		t.Fatalf("exec: code %d err %v stdout %q stderr %q", code, err, out.String(), errb.String())
	}
	// One stream of the two (kubectl exec with stdout only): the other is
	// dropped, not a failure of the exec's start.
	for _, tc := range []struct {
		name string
		o    func(*bytes.Buffer) runtime.ExecOptions
	}{
		{"stdout only", func(b *bytes.Buffer) runtime.ExecOptions {
			return runtime.ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2"}, Stdout: b}
		}},
		{"stderr only", func(b *bytes.Buffer) runtime.ExecOptions {
			return runtime.ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2"}, Stderr: b}
		}},
	} {
		for range 5 { // the shim's failure let some output through at times
			var b bytes.Buffer
			code, err := rt.Exec(ctx, id, tc.o(&b))
			want := map[string]string{"stdout only": "out\n", "stderr only": "err\n"}[tc.name]
			if err != nil || code != 0 || b.String() != want {
				t.Fatalf("exec with %s: code %d err %v output %q, want %q", tc.name, code, err, b.String(), want)
			}
		}
	}
	out.Reset()
	code, err = rt.Exec(ctx, id, runtime.ExecOptions{Cmd: []string{"sh", "-c", "tty"}, Stdout: &out, TTY: true})
	if err != nil || code != 0 || !strings.HasPrefix(out.String(), "/dev/pts/") {
		t.Fatalf("exec with tty: code %d err %v output %q", code, err, out.String())
	}
	// A cancelled exec returns at once.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := rt.Exec(cctx, id, runtime.ExecOptions{Cmd: []string{"sleep", "100"}}); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled exec: %v after %s", err, time.Since(start))
	}
	if _, err := rt.Exec(ctx, id, runtime.ExecOptions{}); err == nil {
		t.Fatal("exec without a command succeeded")
	}
}
