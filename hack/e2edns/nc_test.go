package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseNC(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    ncOptions
		wantErr string
	}{
		{args: []string{"-v", "-t", "-w", "2", "svc", "80"}, want: ncOptions{verbose: true, wait: 2 * time.Second, host: "svc", port: "80"}},
		{args: []string{"-v", "-u", "-w", "2", "10.0.0.1", "53"}, want: ncOptions{udp: true, verbose: true, wait: 2 * time.Second, host: "10.0.0.1", port: "53"}},
		{args: []string{"-vz", "10.0.0.1", "80", "-w", "3"}, want: ncOptions{zero: true, verbose: true, wait: 3 * time.Second, host: "10.0.0.1", port: "80"}},
		{args: []string{"-u", "-w5", "-p", "12345", "h", "9"}, want: ncOptions{udp: true, wait: 5 * time.Second, srcPort: 12345, host: "h", port: "9"}},
		{args: []string{"-lU", "/tmp/s"}, wantErr: "option -l is not supported"},
		{args: []string{"-w", "x", "h", "1"}, wantErr: `-w: "x" is not a number`},
		{args: []string{"h"}, wantErr: "want HOST PORT"},
		{args: []string{"-n", "name", "1"}, wantErr: "not an address"},
	} {
		got, err := parseNC(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseNC(%q) = %v, want an error with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseNC(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// The Services specs' reachability check against loopback servers that
// answer as agnhost's netexec does: TCP after the request, UDP per
// datagram; a closed port fails.
func TestNCLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until nc half-closes
				if strings.TrimSpace(string(b)) == "hostName" {
					c.Write([]byte("pod-a"))
				}
			}()
		}
	}()
	uc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			if strings.TrimSpace(string(buf[:n])) == "hostName" {
				uc.WriteTo([]byte("pod-b"), from)
			}
		}
	}()
	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := nc(args, strings.NewReader("hostName\n"), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	_, tport, _ := net.SplitHostPort(ln.Addr().String())
	if out, errOut, code := run("-v", "-t", "-w", "2", "127.0.0.1", tport); code != 0 || out != "pod-a" || !strings.Contains(errOut, "succeeded") {
		t.Errorf("tcp: %q %q %d", out, errOut, code)
	}
	_, uport, _ := net.SplitHostPort(uc.LocalAddr().String())
	if out, _, code := run("-v", "-u", "-w", "1", "127.0.0.1", uport); code != 0 || out != "pod-b" {
		t.Errorf("udp: %q %d", out, code)
	}
	if _, _, code := run("-vz", "-w", "2", "127.0.0.1", tport); code != 0 {
		t.Errorf("-z on an open port: %d", code)
	}
	// A closed port: the listener's port once closed.
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closed, _ := net.SplitHostPort(l2.Addr().String())
	l2.Close()
	if out, _, code := run("-v", "-t", "-w", "2", "127.0.0.1", closed); code != 1 || out != "" {
		t.Errorf("closed tcp port: %q %d, want exit 1 and no output", out, code)
	}
}

func TestCurl(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hostName":
			w.Write([]byte("pod-a"))
		case "/host":
			w.Write([]byte(r.Host))
		case "/from":
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			w.Write([]byte(host))
		case "/slow":
			time.Sleep(3 * time.Second)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	run := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := curl(args, &out, &errOut)
		return out.String(), code
	}
	hostport := strings.TrimPrefix(srv.URL, "http://")
	if out, code := run("-g", "-q", "-s", "--connect-timeout", "2", hostport+"/hostName"); code != 0 || out != "pod-a" {
		t.Errorf("plain: %q %d", out, code)
	}
	if out, code := run("-g", "-q", "-s", "-o", "/dev/null", "-w", "%{http_code}", srv.URL+"/nope"); code != 0 || out != "404" {
		t.Errorf("-w http_code: %q %d", out, code)
	}
	if _, code := run("-f", "-s", srv.URL+"/nope"); code != 22 {
		t.Errorf("-f on a 404: %d, want 22", code)
	}
	if out, code := run("-s", "-H", "Host: example.test", srv.URL+"/host"); code != 0 || out != "example.test" {
		t.Errorf("-H Host: %q %d", out, code)
	}
	if _, code := run("-s", "-m", "1", srv.URL+"/slow"); code != 28 {
		t.Errorf("--max-time: %d, want 28", code)
	}
	if out, code := run("-sIk", srv.URL+"/hostName"); code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") {
		t.Errorf("-sIk: %q %d", out, code)
	}
	f := filepath.Join(t.TempDir(), "body")
	if _, code := run("-s", "-o", f, srv.URL+"/hostName"); code != 0 {
		t.Errorf("-o FILE: %d", code)
	} else if b, _ := os.ReadFile(f); string(b) != "pod-a" {
		t.Errorf("-o FILE wrote %q", b)
	}
	if _, code := run("--proxy", "http://127.0.0.1:1", srv.URL); code != 2 {
		t.Errorf("an unsupported option: %d, want 2", code)
	}
	// --interface: the source address (the HostPort spec's), as an address
	// or an interface's name; one that names nothing is curl's error 45.
	if out, code := run("-s", "--interface", "127.0.0.2", srv.URL+"/from"); code != 0 || out != "127.0.0.2" {
		t.Errorf("--interface 127.0.0.2: %q %d", out, code)
	}
	if out, code := run("-s", "--interface", "lo", srv.URL+"/from"); code != 0 || out != "127.0.0.1" {
		t.Errorf("--interface lo: %q %d", out, code)
	}
	if _, code := run("-s", "--interface", "no-such-if0", srv.URL+"/from"); code != 45 {
		t.Errorf("--interface naming nothing: %d, want 45", code)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	if _, code := run("-s", "--connect-timeout", "1", "http://"+closed+"/"); code != 7 {
		t.Errorf("closed port: %d, want 7", code)
	}
}
