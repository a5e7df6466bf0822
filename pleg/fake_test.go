package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// fakeRuntime is an in-memory Runtime whose calls can be made to fail or hang.
type fakeRuntime struct {
	mu         sync.Mutex
	containers map[string]runtime.Container
	listErr    error
	listBlock  chan struct{} // when non-nil, ListContainers waits for it (or ctx)
	hang       map[string]bool
	// busy: inspecting the container takes this long, whatever the context.
	busy map[string]time.Duration
	// inspectErrs are the results of the next inspections of a container,
	// in order (nil: answer normally).
	inspectErrs map[string][]error
	// undetermined: listed as the runtime lists a started container whose
	// task it could not ask (unknown, Undetermined); inspecting it answers.
	undetermined map[string]bool
	lists        int
	inspects     map[string]int
	events       chan runtime.Event
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]runtime.Container{}, hang: map[string]bool{}, busy: map[string]time.Duration{}, inspectErrs: map[string][]error{},
		inspects: map[string]int{}, undetermined: map[string]bool{}, events: make(chan runtime.Event, 100)}
}

func (f *fakeRuntime) set(id, pod string, st runtime.State, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id] = runtime.Container{ID: id, Name: "c-" + id, State: st, ExitCode: code,
		Pod: runtime.PodRef{UID: types.UID("uid-" + pod), Name: pod, Namespace: "ns"}}
}

func (f *fakeRuntime) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, id)
}

func (f *fakeRuntime) ListContainers(ctx context.Context) ([]runtime.Container, error) {
	f.mu.Lock()
	f.lists++
	block, err := f.listBlock, f.listErr
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Container
	for _, c := range f.containers {
		if f.undetermined[c.ID] {
			c.State, c.ExitCode, c.Undetermined = runtime.StateUnknown, 0, true
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeRuntime) InspectContainer(ctx context.Context, id string) (runtime.Container, error) {
	f.mu.Lock()
	f.inspects[id]++
	hang, busy := f.hang[id], f.busy[id]
	c, ok := f.containers[id]
	var err error
	if errs := f.inspectErrs[id]; len(errs) > 0 {
		err, f.inspectErrs[id] = errs[0], errs[1:]
	}
	f.mu.Unlock()
	time.Sleep(busy)
	if err != nil {
		return runtime.Container{}, err
	}
	if hang {
		<-ctx.Done()
		return runtime.Container{}, ctx.Err()
	}
	if !ok {
		return runtime.Container{}, fmt.Errorf("fake: %s: %w", id, runtime.ErrNotFound)
	}
	return c, nil
}

func (f *fakeRuntime) Subscribe(ctx context.Context) <-chan runtime.Event {
	out := make(chan runtime.Event)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-f.events:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (f *fakeRuntime) inspectCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inspects[id]
}

func (f *fakeRuntime) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// drain returns the events currently buffered in ch as "type/containerID".
func drain(ch <-chan Event) []string {
	var out []string
	for {
		select {
		case ev := <-ch:
			out = append(out, string(ev.Type)+"/"+ev.ContainerID)
		default:
			return out
		}
	}
}
