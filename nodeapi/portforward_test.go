package nodeapi

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// pipeStream is one end of a forwarded connection as the streaming server
// hands it over.
type pipeStream struct {
	io.Reader
	io.WriteCloser
}

func (p pipeStream) Close() error { return p.WriteCloser.Close() }

func TestForwarder(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c) // until the client half-closes
		_, _ = c.Write([]byte("echo:" + string(b)))
		c.Close()
	}()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- forwarder{hostNetwork: true}.PortForward(context.Background(), "p", "uid", port, pipeStream{inR, outW})
	}()
	go func() { _, _ = inW.Write([]byte("ping")); inW.Close() }()
	got, _ := io.ReadAll(outR)
	if string(got) != "echo:ping" {
		t.Fatalf("forwarded %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A pod without hostNetwork and without its namespace is not dialled
	// on the host.
	err = forwarder{netnsPath: filepath.Join(t.TempDir(), "none")}.PortForward(context.Background(), "p", "uid", port, pipeStream{strings.NewReader(""), nopWriteCloser{}})
	if err == nil || !strings.Contains(err.Error(), "no network namespace") {
		t.Fatalf("no namespace: %v", err)
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
