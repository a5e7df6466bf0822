package nodeapi

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/nodeagent/runtime"
)

// idleExec writes a line, then carries nothing until released: an idle
// exec session.
type idleExec struct{ release chan struct{} }

func (f idleExec) Exec(ctx context.Context, _ string, o runtime.ExecOptions) (int, error) {
	_, _ = o.Stdout.Write([]byte("hello\n"))
	select {
	case <-ctx.Done():
	case <-f.release:
	}
	return 0, nil
}

// streamingConnectionIdleTimeout (Options.StreamIdleTimeout) closes an
// exec connection that carried nothing that long, over a real SPDY
// connection as kubectl and the API server open it; the default (4h)
// keeps it open.
func TestStreamIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		idle       time.Duration
		wantClosed bool
	}{
		{"a short idle timeout closes the idle session", 300 * time.Millisecond, true},
		{"kubelet's default keeps it", 0, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fe := idleExec{release: make(chan struct{})}
			e := newTestEnv(t, func(o *Options) { o.Exec, o.StreamIdleTimeout = fe, tc.idle })
			pod := testPod()
			e.pods.pods = []*v1.Pod{pod}
			e.conts.cs = []runtime.Container{{ID: "c1", Pod: runtime.PodRef{UID: pod.UID}, Name: "app", State: runtime.StateRunning}}
			srv := httptest.NewServer(e.s.Handler())
			var once sync.Once
			release := func() { once.Do(func() { close(fe.release) }) }
			defer srv.Close()
			defer release() // before srv.Close, which waits for the handler
			u, _ := url.Parse(srv.URL + "/exec/default/web/app?command=sh&output=1")
			ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL, BearerToken: "good-admin"}, "POST", u)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out bytes.Buffer
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}) }()
			select {
			case err := <-done:
				t.Logf("stream ended after %v: %v", time.Since(start), err)
				if !tc.wantClosed {
					t.Fatalf("the session ended after %v (%v), want it kept open", time.Since(start), err)
				}
				if out.String() != "hello\n" {
					t.Errorf("output %q before the close, want the command's", out.String())
				}
			case <-time.After(2 * time.Second):
				if tc.wantClosed {
					t.Fatalf("an idle session with a %v idle timeout still open after 2s", tc.idle)
				}
				release()
				if err := <-done; err != nil {
					t.Errorf("released session: %v", err)
				}
			}
		})
	}
}
