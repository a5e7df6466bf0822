package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/runtime"
)

// fakeRuntime lists a fixed set of containers.
type fakeRuntime struct{ cs []runtime.Container }

func (f *fakeRuntime) ListContainers(context.Context) ([]runtime.Container, error) { return f.cs, nil }
func (f *fakeRuntime) InspectContainer(context.Context, string) (runtime.Container, error) {
	return runtime.Container{}, runtime.ErrNotFound
}
func (f *fakeRuntime) Subscribe(ctx context.Context) <-chan runtime.Event {
	ch := make(chan runtime.Event)
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func TestEventsCommandFollowsStream(t *testing.T) {
	rt := &fakeRuntime{}
	p, err := pleg.New(rt, pleg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/events", pleg.EventsHandler(p))
	srv := httptest.NewServer(mux)
	var stdout syncBuffer
	var stderr bytes.Buffer
	done := make(chan int)
	go func() { done <- runEventsCommand([]string{"--address", srv.URL, "--pod", "ns/p"}, &stdout, &stderr) }()

	// Generate events until the command has connected and printed one.
	present := []runtime.Container{{ID: "a", Name: "app", State: runtime.StateExited, ExitCode: 1,
		Pod: runtime.PodRef{UID: "u", Name: "p", Namespace: "ns"}}}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		rt.cs = nil // alternate: present (ContainerDied), removed (ContainerRemoved)
		if i%2 == 0 {
			rt.cs = present
		}
		_ = p.Relist(context.Background())
		time.Sleep(20 * time.Millisecond)
		if strings.Contains(stdout.String(), "\n") || time.Now().After(deadline) {
			break
		}
	}
	srv.CloseClientConnections()
	srv.Close()
	if code := <-done; code != 1 {
		t.Errorf("exit code %d after the agent went away, want 1", code)
	}
	line := strings.SplitN(stdout.String(), "\n", 2)[0]
	for _, want := range []string{`"pod":"ns/p"`, `"container":"app"`, `"source":"relist"`, `"type":"Container`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %s lacks %s", line, want)
		}
	}
}

type syncBuffer = testlog.Buffer

func TestEventsCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--address", "ftp://x"}, 2, "not an http(s) URL"},
		{[]string{"--pod", "nopod"}, 2, "NAMESPACE/NAME"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"--address", "http://127.0.0.1:1"}, 1, "cannot reach the agent"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runEventsCommand(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	if code := runEventsCommand([]string{"--address", srv.URL}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "404") {
		t.Errorf("404: code %d, stderr %q", code, stderr.String())
	}
}
