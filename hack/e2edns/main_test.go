package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    query
		wantErr bool
	}{
		{args: []string{"+notcp", "+noall", "+answer", "+search", "kubernetes.default", "A"},
			want: query{port: "53", answer: true, search: true, name: "kubernetes.default", qtype: dnsmessage.TypeA}},
		{args: []string{"+tcp", "+noall", "+answer", "+search", "_http._tcp.svc.ns.svc", "SRV"},
			want: query{port: "53", answer: true, tcp: true, search: true, name: "_http._tcp.svc.ns.svc", qtype: dnsmessage.TypeSRV}},
		{args: []string{"+short", "@10.0.0.5", "-p", "10053", "x.example.com.", "CNAME"},
			want: query{server: "10.0.0.5", port: "10053", short: true, answer: true, name: "x.example.com.", qtype: dnsmessage.TypeCNAME}},
		{args: []string{"+short", "-x", "10.96.0.10"},
			want: query{port: "53", short: true, answer: true, name: "10.0.96.10.in-addr.arpa.", qtype: dnsmessage.TypePTR}},
		{args: []string{"+short", "a"}, want: query{port: "53", short: true, answer: true, name: "a", qtype: dnsmessage.TypeA}},
		{args: []string{"+trace", "a"}, wantErr: true},
		{args: []string{"+short"}, wantErr: true},
		{args: []string{"a", "b"}, wantErr: true},
	} {
		got, err := parseArgs(tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseArgs(%q) error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("parseArgs(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func TestCandidates(t *testing.T) {
	rc := resolvConf{search: []string{"ns.svc.cluster.local", "svc.cluster.local"}, ndots: 5}
	for _, tc := range []struct {
		q    query
		want []string
	}{
		{query{name: "kubernetes.default", search: true},
			[]string{"kubernetes.default.ns.svc.cluster.local.", "kubernetes.default.svc.cluster.local.", "kubernetes.default."}},
		{query{name: "kubernetes.default", search: false}, []string{"kubernetes.default."}},
		{query{name: "a.b.c.d.e.f", search: true},
			[]string{"a.b.c.d.e.f.", "a.b.c.d.e.f.ns.svc.cluster.local.", "a.b.c.d.e.f.svc.cluster.local."}},
		{query{name: "x.", search: true}, []string{"x."}},
	} {
		if got := candidates(tc.q, rc); !slices.Equal(got, tc.want) {
			t.Errorf("candidates(%q, search %v) = %q, want %q", tc.q.name, tc.q.search, got, tc.want)
		}
	}
}

func TestReverseName(t *testing.T) {
	if got := reverseName(netip.MustParseAddr("10.96.0.10")); got != "10.0.96.10.in-addr.arpa." {
		t.Errorf("reverseName(10.96.0.10) = %s", got)
	}
	if got := reverseName(netip.MustParseAddr("fd00::1")); !strings.HasPrefix(got, "1.0.0.0.") || !strings.HasSuffix(got, ".0.0.d.f.ip6.arpa.") {
		t.Errorf("reverseName(fd00::1) = %s", got)
	}
}

// answer is the test server's zone: one A record and one SRV record.
func answer(req []byte) []byte {
	var m dnsmessage.Message
	if err := m.Unpack(req); err != nil || len(m.Questions) != 1 {
		return nil
	}
	q := m.Questions[0]
	resp := dnsmessage.Message{Header: dnsmessage.Header{ID: m.ID, Response: true, RCode: dnsmessage.RCodeNameError}, Questions: m.Questions}
	hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 30}
	switch {
	case q.Name.String() == "svc.ns.svc.cluster.local." && q.Type == dnsmessage.TypeA:
		resp.RCode = dnsmessage.RCodeSuccess
		resp.Answers = []dnsmessage.Resource{{Header: hdr, Body: &dnsmessage.AResource{A: [4]byte{10, 96, 7, 8}}}}
	case q.Name.String() == "_http._tcp.svc.ns.svc.cluster.local." && q.Type == dnsmessage.TypeSRV:
		resp.RCode = dnsmessage.RCodeSuccess
		resp.Answers = []dnsmessage.Resource{{Header: hdr, Body: &dnsmessage.SRVResource{Priority: 0, Weight: 100, Port: 80,
			Target: dnsmessage.MustNewName("svc.ns.svc.cluster.local.")}}}
	}
	b, _ := resp.Pack()
	return b
}

// serve answers on 127.0.0.1 over UDP and TCP at one port until the test ends.
func serve(t *testing.T) string {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	port := tl.Addr().(*net.TCPAddr).Port
	ul, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Skipf("UDP port %d taken beside its TCP twin: %v", port, err)
	}
	t.Cleanup(func() { ul.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := ul.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = ul.WriteToUDP(answer(buf[:n]), from)
		}
	}()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err == nil {
				req := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, req); err == nil {
					a := answer(req)
					_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(a))), a...))
				}
			}
			c.Close()
		}
	}()
	return tl.Addr().String()
}

// dig against a real server on loopback, over UDP and TCP, in the specs'
// output forms.
func TestDigLoopback(t *testing.T) {
	host, port, _ := net.SplitHostPort(serve(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"+short", "svc.ns.svc.cluster.local"}, "10.96.7.8\n"},
		{[]string{"+tcp", "+short", "svc.ns.svc.cluster.local", "A"}, "10.96.7.8\n"},
		{[]string{"+notcp", "+noall", "+answer", "svc.ns.svc.cluster.local.", "A"}, "svc.ns.svc.cluster.local.\t30\tIN\tA\t10.96.7.8\n"},
		{[]string{"+tcp", "+noall", "+answer", "_http._tcp.svc.ns.svc.cluster.local", "SRV"},
			"_http._tcp.svc.ns.svc.cluster.local.\t30\tIN\tSRV\t0 100 80 svc.ns.svc.cluster.local.\n"},
		{[]string{"+short", "nothing.ns.svc.cluster.local"}, ""},
	} {
		var out, errOut bytes.Buffer
		code := dig(append([]string{"@" + host, "-p", port}, tc.args...), &out, &errOut)
		if code != 0 || out.String() != tc.want {
			t.Errorf("dig %q = exit %d, %q (stderr %q), want 0, %q", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
	// No answer (a socket that reads nothing): dig's exit status 9,
	// after its 5 s timeout.
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	silent := l.LocalAddr().(*net.UDPAddr).Port
	defer l.Close()
	var out, errOut bytes.Buffer
	if code := dig([]string{"@127.0.0.1", "-p", strconv.Itoa(silent), "+short", "x"}, &out, &errOut); code != 9 {
		t.Errorf("dig against a silent server = exit %d, want 9", code)
	}
}
