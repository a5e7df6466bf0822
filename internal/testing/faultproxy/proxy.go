// Package faultproxy is a loopback TCP proxy for fault tests: it sits between
// a client (the agent) and a server (the API server) and, on command, stops
// forwarding on some or all connections, delays what it forwards, or resets
// every connection. It never looks inside the byte stream (TLS passes
// through untouched), so the client's certificates and the server's serving
// certificate work as with a direct connection as long as the server's
// certificate accepts the address the client dials (127.0.0.1).
//
// What each fault models:
//
//   - Forward: a healthy network.
//   - BlackholeEstablished: a load balancer or NAT that lost its connection
//     table. Every connection open at the switch is kept open and forwards
//     nothing in either direction, for ever (until either side closes it);
//     connections opened afterwards are forwarded. The proxy stops reading
//     from a blackholed connection, so its peer's kernel sees no error: its
//     writes succeed until the socket buffers fill, then block without any
//     TCP timeout. Only an application-level check (HTTP/2 PING, request
//     timeouts) can find such a connection dead.
//   - BlackholeAll: a network partition. Nothing is forwarded on any
//     connection, old or new (new ones are accepted and connected upstream,
//     but their bytes wait). When the mode leaves BlackholeAll, connections
//     it froze resume and deliver what was held back, as TCP does after a
//     partition heals (connections frozen by BlackholeEstablished stay
//     frozen).
//   - Latency: one-way propagation delay, per direction, like netem's
//     delay: every chunk read is written Latency later, chunks are
//     pipelined (throughput is unchanged) and kept in order. A delay of d on
//     the server-to-client direction makes every request's response d late;
//     HTTP/2 PINGs are delayed too.
//   - ResetAll: an abrupt failure of every connection (a middlebox restart):
//     each open connection is closed with a TCP RST toward the client.
//
// A Proxy is safe for concurrent use. Close stops it and closes every
// connection.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode says what the proxy forwards.
type Mode int

const (
	Forward Mode = iota
	BlackholeEstablished
	BlackholeAll
)

func (m Mode) String() string {
	switch m {
	case Forward:
		return "forward"
	case BlackholeEstablished:
		return "blackhole-established"
	case BlackholeAll:
		return "blackhole-all"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Direction is one way through the proxy.
type Direction int

const (
	// Up is client to server.
	Up Direction = iota
	// Down is server to client.
	Down
)

// Proxy forwards TCP connections from its loopback listener to a target.
type Proxy struct {
	target string
	ln     net.Listener
	dialer net.Dialer

	mu      sync.Mutex
	cond    *sync.Cond // on mu; broadcast when mode, latency or a conn changes
	mode    Mode
	latency [2]time.Duration
	conns   map[*pconn]struct{}
	closed  bool
	wg      sync.WaitGroup
	// accepted counts connections ever accepted.
	accepted int
}

// pconn is one proxied connection: client side and server side.
type pconn struct {
	client, server net.Conn
	// lost is set (under Proxy.mu) when BlackholeEstablished froze it.
	lost   bool
	closed bool
	once   sync.Once
}

// New listens on 127.0.0.1 (a free port) and forwards to target
// ("host:port"). The proxy starts in Forward mode.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*pconn]struct{}{}, dialer: net.Dialer{Timeout: 5 * time.Second}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the listener's address ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetMode switches the mode; see the package doc for what each does.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == BlackholeEstablished {
		for c := range p.conns {
			c.lost = true
		}
	}
	p.mode = m
	p.cond.Broadcast()
}

// Mode is the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetLatency sets the one-way delay of direction d for chunks read from now
// on (0 turns it off).
func (p *Proxy) SetLatency(d Direction, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency[d] = delay
	p.cond.Broadcast()
}

// ResetAll closes every open connection, with a RST toward the client.
// New connections are forwarded as the mode says.
func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	cs := make([]*pconn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		if tc, ok := c.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		p.closeConn(c)
	}
	return len(cs)
}

// Stats counts connections: open now, and accepted since New.
func (p *Proxy) Stats() (open, accepted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns), p.accepted
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(client)
		}()
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := p.dialer.Dial("tcp", p.target)
	if err != nil {
		// As a refused connection would: the client sees a reset.
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		client.Close()
		return
	}
	c := &pconn{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.accepted++
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(c, Up, client, server) }()
	go func() { defer wg.Done(); p.pipe(c, Down, server, client) }()
	wg.Wait()
}

// chunk is bytes read from one side, with when they may be written.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards src to dst: a reader that stamps each chunk with its due
// time, and a writer that waits for it. Both hold still while the
// connection is blackholed. Any error on either side closes both sides.
func (p *Proxy) pipe(c *pconn, d Direction, src, dst net.Conn) {
	queue := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range queue {
			if !p.waitForwarding(c) {
				return
			}
			if wait := time.Until(ch.due); wait > 0 {
				time.Sleep(wait)
			}
			if !p.waitForwarding(c) {
				return
			}
			if _, err := dst.Write(ch.b); err != nil {
				p.closeConn(c)
				return
			}
		}
	}()
	eof := false
	defer func() {
		if eof && p.forwarding(c) {
			// src closed cleanly: deliver what it sent before its close
			// (a response, an HTTP/2 GOAWAY), then close both sides.
			close(queue)
			<-done
			p.closeConn(c)
			return
		}
		p.closeConn(c) // wakes a writer held by a blackhole
		close(queue)
		<-done
	}()
	for {
		if !p.waitForwarding(c) {
			return
		}
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			delay := p.latency[d]
			p.mu.Unlock()
			select {
			case queue <- chunk{b: buf[:n], due: time.Now().Add(delay)}:
			case <-done: // the writer failed
				return
			}
		}
		if err != nil {
			// EOF, a reset or our own close: the connection is over.
			eof = errors.Is(err, io.EOF)
			return
		}
	}
}

// forwarding reports whether c is open and not held by a blackhole.
func (p *Proxy) forwarding(c *pconn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !c.closed && !c.lost && p.mode != BlackholeAll
}

// waitForwarding blocks while c may not forward; false once c is closed.
func (p *Proxy) waitForwarding(c *pconn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !c.closed && (c.lost || p.mode == BlackholeAll) {
		p.cond.Wait()
	}
	return !c.closed
}

func (p *Proxy) closeConn(c *pconn) {
	c.once.Do(func() {
		p.mu.Lock()
		c.closed = true
		delete(p.conns, c)
		p.cond.Broadcast()
		p.mu.Unlock()
		c.client.Close()
		c.server.Close()
	})
}
