package faultproxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every connection until it is closed.
func echoServer(t *testing.T) string {
	return tcpServer(t, func(c net.Conn) { defer c.Close(); _, _ = io.Copy(c, c) })
}

// tcpServer serves every connection with serve until the test ends and
// returns its loopback address.
func tcpServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	b := make([]byte, len(msg))
	_, err := io.ReadFull(c, b)
	return string(b), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, 2*time.Second)
	if err != nil || got != msg {
		t.Fatalf("round trip %q = %q, %v", msg, got, err)
	}
}

func mustBeSilent(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip %q through a blackhole = %q, %v; want a timeout (nothing forwarded, connection open)", msg, got, err)
	}
}

func TestForward(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "hello")
	if open, acc := p.Stats(); open != 1 || acc != 1 {
		t.Errorf("Stats = %d open, %d accepted; want 1, 1", open, acc)
	}
}

func TestBlackholeEstablishedFreezesOnlyOldConnections(t *testing.T) {
	p := newProxy(t)
	old := dial(t, p)
	mustEcho(t, old, "before")
	p.SetMode(BlackholeEstablished)
	mustBeSilent(t, old, "lost")
	fresh := dial(t, p)
	mustEcho(t, fresh, "new connections work")
	// The lost connection stays lost when the mode changes back: a load
	// balancer that forgot a connection does not remember it later.
	p.SetMode(Forward)
	_ = old.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := old.Read(make([]byte, 64)); n != 0 || err == nil {
		t.Fatalf("lost connection delivered %d bytes (%v) after Forward", n, err)
	}
	mustEcho(t, fresh, "still")
}

func TestBlackholeAllHoldsThenResumes(t *testing.T) {
	p := newProxy(t)
	old := dial(t, p)
	mustEcho(t, old, "a")
	p.SetMode(BlackholeAll)
	mustBeSilent(t, old, "held")
	fresh := dial(t, p) // accepted: a partition does not refuse connections
	mustBeSilent(t, fresh, "x")
	p.SetMode(Forward)
	// What was held is delivered, in order, on both connections.
	for _, tc := range []struct {
		c    net.Conn
		want string
	}{{old, "held"}, {fresh, "x"}} {
		_ = tc.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, len(tc.want))
		if _, err := io.ReadFull(tc.c, b); err != nil || string(b) != tc.want {
			t.Fatalf("after the partition: read %q, %v; want %q", b, err, tc.want)
		}
		mustEcho(t, tc.c, "after")
	}
}

func TestLatencyDelaysEachDirectionAndPipelines(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "warm")
	const d = 200 * time.Millisecond
	for _, tc := range []struct {
		name     string
		up, down time.Duration
		want     time.Duration
	}{
		{"down only", 0, d, d},
		{"up only", d, 0, d},
		{"both", d, d, 2 * d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.SetLatency(Up, tc.up)
			p.SetLatency(Down, tc.down)
			start := time.Now()
			mustEcho(t, c, "ping")
			if took := time.Since(start); took < tc.want || took > tc.want+150*time.Millisecond {
				t.Errorf("round trip took %s, want %s", took, tc.want)
			}
		})
	}
	// Chunks are pipelined: ten writes 20ms apart each arrive d later, so
	// the last echo is back about d+180ms after the first write, not 10d.
	p.SetLatency(Up, 0)
	p.SetLatency(Down, d)
	start := time.Now()
	for i := 0; i < 10; i++ {
		if _, err := c.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The writes' own time (200 ms, more when a loaded machine stretches
	// the sleeps) is the test's, not the proxy's: the bound counts from
	// the last write, and still tells pipelining from 10d.
	wrote := time.Since(start)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > wrote+d+200*time.Millisecond {
		t.Errorf("10 pipelined chunks written in %s took %s, want about %s", wrote, took, d+200*time.Millisecond)
	}
}

func TestResetAll(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "x")
	if n := p.ResetAll(); n != 1 {
		t.Errorf("ResetAll reset %d connections, want 1", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 8))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read after ResetAll: %v, want ECONNRESET", err)
	}
	mustEcho(t, dial(t, p), "new connections work")
}

func TestResetAllFreesBlackholedConnections(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	mustEcho(t, c, "x")
	p.SetMode(BlackholeEstablished)
	mustBeSilent(t, c, "y")
	p.ResetAll()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if open, _ := p.Stats(); open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a blackholed connection outlived ResetAll")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUnreachableTargetResetsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // nothing listens there now (closed after New took another port)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return // the reset came before connect returned: refused all the same
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(6 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a proxy to a closed port succeeded")
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	mustEcho(t, c, "x")
	p.SetMode(BlackholeAll)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close hung on a blackholed connection")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the listener still accepts after Close")
	}
}

// What a server sends right before it closes the connection reaches the
// client whole, with and without latency: the close waits for the bytes.
func TestDataBeforeACloseIsDelivered(t *testing.T) {
	payload := make([]byte, 100<<10)
	for i := range payload {
		payload[i] = byte(i)
	}
	p, err := New(tcpServer(t, func(c net.Conn) { _, _ = c.Write(payload); c.Close() }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		p.SetLatency(Down, delay)
		for i := 0; i < 10; i++ {
			c := dial(t, p)
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil || len(got) != len(payload) {
				t.Fatalf("latency %v, try %d: read %d of %d bytes before the close (err %v)", delay, i, len(got), len(payload), err)
			}
		}
	}
}
