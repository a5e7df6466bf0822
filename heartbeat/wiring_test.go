package heartbeat

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// connCounter counts the connections a test server accepted and closed.
type connCounter struct {
	mu             sync.Mutex
	opened, closed int
}

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.opened++
	case http.StateClosed:
		c.closed++
	}
}

func (c *connCounter) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

// When a renewal goes unanswered, the failure callback NewClientConfigs returns
// closes the main client's connections too (kubelet's connection
// rotation), so its next request dials afresh instead of waiting on a
// connection that may be dead. The agent and the fleet simulator share it.
func TestNewClientConfigsRotatesTheMainClientsConnections(t *testing.T) {
	var cc connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`))
	}))
	srv.Config.ConnState = cc.state
	srv.Start()
	t.Cleanup(srv.Close)

	cfg := &rest.Config{Host: srv.URL}
	_, onFailure, err := NewClientConfigs(cfg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	main, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := main.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get()
	get()
	if opened, _ := cc.counts(); opened != 1 {
		t.Fatalf("main client opened %d connections for two requests, want 1 (kept alive)", opened)
	}
	onFailure()
	deadline := time.Now().Add(5 * time.Second)
	for _, closed := cc.counts(); closed < 1; _, closed = cc.counts() {
		if time.Now().After(deadline) {
			t.Fatal("the main client's connection was not closed after the heartbeat's failure callback")
		}
		time.Sleep(10 * time.Millisecond)
	}
	get()
	if opened, _ := cc.counts(); opened != 2 {
		t.Errorf("main client opened %d connections in all, want 2 (a new one after the rotation)", opened)
	}
}
