// Command e2edns stands in for the two DNS tools the upstream DNS
// [Conformance] specs (k8s.io/kubernetes test/e2e/network/dns*.go) run in
// their probe pods: bind's dig (the agnhost image has it from Alpine's
// bind-tools, jessie-dnsutils from Debian's dnsutils) and glibc's getent.
// Neither image can be pulled here and busybox has neither, so the full
// suite's images (testimage.E2EStandIns) carry this program as
// /usr/bin/dig and /usr/bin/getent; it acts by the name it is run as. The
// agnhost stand-in also runs it as /usr/bin/nc (OpenBSD netcat's options:
// nc.go) and /usr/bin/curl (curl.go), which upstream's image has from
// Alpine and busybox lacks or has with other options.
//
// dig: the options the specs use and their output forms, nothing more:
//
//	dig [@server] [-p port] [+short] [+tcp|+notcp] [+noall] [+answer] [+search] [-x addr] name [type]
//
// type is A (default), AAAA, CNAME, SRV, PTR or TXT; the query goes to
// server (default: the first nameserver of /etc/resolv.conf) over UDP, or
// TCP with +tcp. With +search, a name with fewer dots than resolv.conf's
// ndots is tried with each search domain first, then as it is, until an
// answer comes back (bind's dig stops at the first NOERROR with answers
// too). Output: with +short, each answer's data ("10.96.0.1",
// "target.example.com.", SRV's "priority weight port target."); else the
// answer section as "name. ttl IN type data" lines. Exit status 0 when a
// server answered (whatever its rcode, as dig), 9 when none did.
//
// getent hosts NAME: the addresses of NAME by the Go resolver (/etc/hosts,
// then DNS with resolv.conf's search list), "address  NAME" a line; exit
// status 2 when there is none (glibc's getent).
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func main() {
	var code int
	switch filepath.Base(os.Args[0]) {
	case "getent":
		code = getent(os.Args[1:], os.Stdout)
	case "nc":
		code = ncMain()
	case "curl":
		code = curl(os.Args[1:], os.Stdout, os.Stderr)
	default:
		code = dig(os.Args[1:], os.Stdout, os.Stderr)
	}
	os.Exit(code)
}

func getent(args []string, out io.Writer) int {
	if len(args) != 2 || args[0] != "hosts" {
		fmt.Fprintln(os.Stderr, "usage: getent hosts NAME (the only database of this stand-in)")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
	if err != nil || len(addrs) == 0 {
		return 2
	}
	for _, a := range addrs {
		fmt.Fprintf(out, "%-15s %s\n", a, args[1])
	}
	return 0
}

// query is a parsed dig command line.
type query struct {
	server string
	port   string
	short  bool
	tcp    bool
	answer bool // print the answer section (+noall +answer prints only it)
	search bool
	name   string
	qtype  dnsmessage.Type
}

var types = map[string]dnsmessage.Type{
	"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "CNAME": dnsmessage.TypeCNAME,
	"SRV": dnsmessage.TypeSRV, "PTR": dnsmessage.TypePTR, "TXT": dnsmessage.TypeTXT,
}

func parseArgs(args []string) (query, error) {
	q := query{port: "53", answer: true, qtype: dnsmessage.TypeA}
	typed := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "+short":
			q.short = true
		case a == "+tcp" || a == "+vc":
			q.tcp = true
		case a == "+notcp" || a == "+novc":
			q.tcp = false
		case a == "+search":
			q.search = true
		case a == "+nosearch":
			q.search = false
		case a == "+answer" || a == "+noall":
			// The answer section is the only one this stand-in prints.
		case strings.HasPrefix(a, "+"):
			return q, fmt.Errorf("option %s is not supported by this stand-in", a)
		case strings.HasPrefix(a, "@"):
			q.server = a[1:]
		case a == "-p" && i+1 < len(args):
			i++
			q.port = args[i]
		case a == "-x" && i+1 < len(args):
			i++
			ip, err := netip.ParseAddr(args[i])
			if err != nil {
				return q, fmt.Errorf("-x %s: %w", args[i], err)
			}
			q.name, q.qtype, typed = reverseName(ip), dnsmessage.TypePTR, true
		case strings.HasPrefix(a, "-"):
			return q, fmt.Errorf("option %s is not supported by this stand-in", a)
		default:
			if t, ok := types[strings.ToUpper(a)]; ok && q.name != "" && !typed {
				q.qtype, typed = t, true
				continue
			}
			if q.name != "" {
				return q, fmt.Errorf("a second name %q", a)
			}
			q.name = a
		}
	}
	if q.name == "" {
		return q, errors.New("no name to look up")
	}
	return q, nil
}

// reverseName is ip's in-addr.arpa or ip6.arpa name.
func reverseName(ip netip.Addr) string {
	if ip.Is4() {
		b := ip.As4()
		return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0])
	}
	b := ip.As16()
	var sb strings.Builder
	for i := len(b) - 1; i >= 0; i-- {
		fmt.Fprintf(&sb, "%x.%x.", b[i]&0xf, b[i]>>4)
	}
	return sb.String() + "ip6.arpa."
}

// resolvConf is what dig reads of /etc/resolv.conf.
type resolvConf struct {
	nameserver string
	search     []string
	ndots      int
}

func readResolvConf(path string) resolvConf {
	rc := resolvConf{ndots: 1}
	f, err := os.Open(path)
	if err != nil {
		return rc
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		switch fs[0] {
		case "nameserver":
			if rc.nameserver == "" {
				rc.nameserver = fs[1]
			}
		case "search", "domain":
			rc.search = fs[1:]
		case "options":
			for _, o := range fs[1:] {
				if v, ok := strings.CutPrefix(o, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil {
						rc.ndots = n
					}
				}
			}
		}
	}
	return rc
}

// candidates are the names a query tries, in order.
func candidates(q query, rc resolvConf) []string {
	abs := func(n string) string {
		if strings.HasSuffix(n, ".") {
			return n
		}
		return n + "."
	}
	if !q.search || strings.HasSuffix(q.name, ".") || strings.Count(q.name, ".") >= rc.ndots {
		if q.search && !strings.HasSuffix(q.name, ".") {
			// At or above ndots: as it is first, then the search list.
			out := []string{abs(q.name)}
			for _, d := range rc.search {
				out = append(out, abs(q.name+"."+d))
			}
			return out
		}
		return []string{abs(q.name)}
	}
	var out []string
	for _, d := range rc.search {
		out = append(out, abs(q.name+"."+d))
	}
	return append(out, abs(q.name))
}

func dig(args []string, out, errOut io.Writer) int {
	q, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(errOut, "dig: %v\n", err)
		return 1
	}
	rc := readResolvConf("/etc/resolv.conf")
	server := q.server
	if server == "" {
		server = rc.nameserver
	}
	if server == "" {
		fmt.Fprintln(errOut, "dig: no nameserver in /etc/resolv.conf and none given")
		return 9
	}
	addr := net.JoinHostPort(server, q.port)
	var last *dnsmessage.Message
	for _, name := range candidates(q, rc) {
		m, err := exchange(addr, q.tcp, name, q.qtype)
		if err != nil {
			fmt.Fprintf(errOut, ";; %v\n", err)
			continue
		}
		last = m
		if m.RCode == dnsmessage.RCodeSuccess && len(m.Answers) > 0 {
			break
		}
	}
	if last == nil {
		fmt.Fprintf(errOut, ";; no servers could be reached (%s)\n", addr)
		return 9
	}
	for _, r := range last.Answers {
		data := rdata(r.Body)
		if q.short {
			fmt.Fprintln(out, data)
			continue
		}
		fmt.Fprintf(out, "%s\t%d\tIN\t%s\t%s\n", r.Header.Name.String(), r.Header.TTL, strings.TrimPrefix(r.Header.Type.String(), "Type"), data)
	}
	return 0
}

// rdata is a record's data as dig prints it.
func rdata(b dnsmessage.ResourceBody) string {
	switch r := b.(type) {
	case *dnsmessage.AResource:
		return netip.AddrFrom4(r.A).String()
	case *dnsmessage.AAAAResource:
		return netip.AddrFrom16(r.AAAA).String()
	case *dnsmessage.CNAMEResource:
		return r.CNAME.String()
	case *dnsmessage.PTRResource:
		return r.PTR.String()
	case *dnsmessage.SRVResource:
		return fmt.Sprintf("%d %d %d %s", r.Priority, r.Weight, r.Port, r.Target.String())
	case *dnsmessage.TXTResource:
		qs := make([]string, len(r.TXT))
		for i, t := range r.TXT {
			qs[i] = strconv.Quote(t)
		}
		return strings.Join(qs, " ")
	default:
		return b.GoString()
	}
}

// exchange sends one query and reads its reply (5 s, as dig's default
// timeout; dig's UDP retries are left to the specs' loops).
func exchange(addr string, tcp bool, name string, t dnsmessage.Type) (*dnsmessage.Message, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, err
	}
	id := uint16(time.Now().UnixNano())
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: n, Type: t, Class: dnsmessage.ClassINET}},
	}
	req, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	network := "udp"
	if tcp {
		network = "tcp"
	}
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var resp []byte
	if tcp {
		framed := binary.BigEndian.AppendUint16(nil, uint16(len(req)))
		if _, err := conn.Write(append(framed, req...)); err != nil {
			return nil, err
		}
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			return nil, err
		}
		resp = make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(conn, resp); err != nil {
			return nil, err
		}
	} else {
		if _, err := conn.Write(req); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		k, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		resp = buf[:k]
	}
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		return nil, err
	}
	if m.ID != id {
		return nil, fmt.Errorf("reply id %d, want %d", m.ID, id)
	}
	return &m, nil
}
