package main

// nc stands in for OpenBSD netcat (Alpine's netcat-openbsd in the upstream
// agnhost image), whose options the [Conformance] specs' exec pods use and
// busybox's nc does not have (-t): the Services specs' reachability check
// (test/e2e/framework/service/jig.go) runs
//
//	echo hostName | nc -v -t -w 2 HOST PORT
//	echo hostName | nc -v -u -w 2 HOST PORT
//
// and wants a non-empty answer on stdout. Supported, as OpenBSD nc does
// them: -t (TCP, the default), -u (UDP), -w SECONDS (the connect timeout
// and the idle timeout of the reads that follow; with -u also how long to
// wait for a reply), -z (connect only, no data), -v (say so on stderr),
// -n (no name lookup: the host must be an address), -p PORT (the source
// port). Listening (-l), Unix sockets (-U) and the rest are refused with
// a message naming the option, exit status 1.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

type ncOptions struct {
	udp, zero, verbose, numeric bool
	wait                        time.Duration // 0: none
	srcPort                     int
	host, port                  string
}

func parseNC(args []string) (ncOptions, error) {
	var o ncOptions
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		// Flags may be grouped (-vz); -w and -p take a value, attached
		// or as the next argument.
		for j := 1; j < len(a); j++ {
			switch c := a[j]; c {
			case 't':
			case 'u':
				o.udp = true
			case 'z':
				o.zero = true
			case 'v':
				o.verbose = true
			case 'n':
				o.numeric = true
			case 'w', 'p':
				v := a[j+1:]
				if v == "" {
					if i+1 >= len(args) {
						return o, fmt.Errorf("option -%c needs a value", c)
					}
					i++
					v = args[i]
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return o, fmt.Errorf("option -%c: %q is not a number", c, v)
				}
				if c == 'w' {
					o.wait = time.Duration(n) * time.Second
				} else {
					o.srcPort = n
				}
				j = len(a)
			default:
				return o, fmt.Errorf("option -%c is not supported by this stand-in for OpenBSD nc (only -t -u -w -z -v -n -p)", c)
			}
		}
	}
	if len(rest) != 2 {
		return o, fmt.Errorf("want HOST PORT, got %q", rest)
	}
	o.host, o.port = rest[0], rest[1]
	if _, err := strconv.ParseUint(o.port, 10, 16); err != nil {
		return o, fmt.Errorf("port %q is not a number", o.port)
	}
	if o.numeric && net.ParseIP(o.host) == nil {
		return o, fmt.Errorf("-n: %q is not an address", o.host)
	}
	return o, nil
}

func nc(args []string, in io.Reader, out, errOut io.Writer) int {
	o, err := parseNC(args)
	if err != nil {
		fmt.Fprintln(errOut, "nc:", err)
		return 1
	}
	network := "tcp"
	if o.udp {
		network = "udp"
	}
	d := net.Dialer{Timeout: o.wait}
	if o.srcPort != 0 {
		if o.udp {
			d.LocalAddr = &net.UDPAddr{Port: o.srcPort}
		} else {
			d.LocalAddr = &net.TCPAddr{Port: o.srcPort}
		}
	}
	conn, err := d.Dial(network, net.JoinHostPort(o.host, o.port))
	if err != nil {
		if o.verbose {
			fmt.Fprintf(errOut, "nc: connect to %s port %s (%s) failed: %v\n", o.host, o.port, network, err)
		}
		return 1
	}
	defer conn.Close()
	if o.verbose {
		fmt.Fprintf(errOut, "Connection to %s %s port [%s/*] succeeded!\n", o.host, o.port, network)
	}
	if o.zero {
		return 0
	}
	// stdin to the connection; for TCP its end half-closes the write side
	// (the server sees EOF and may answer then).
	go func() {
		_, _ = io.Copy(conn, in)
		if c, ok := conn.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	}()
	wait := o.wait
	if wait == 0 && o.udp {
		wait = 2 * time.Second // a UDP read needs an end; OpenBSD nc's -u without -w waits for stdin's EOF and more
	}
	buf := make([]byte, 64<<10)
	for {
		if wait > 0 {
			_ = conn.SetReadDeadline(time.Now().Add(wait))
		}
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return 1
			}
		}
		if err != nil {
			var ne net.Error
			if errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout()) {
				return 0
			}
			if o.udp {
				// ICMP port unreachable: OpenBSD nc exits 1 as well.
				return 1
			}
			return 0
		}
	}
}

// ncMain is nc with the process's files.
func ncMain() int { return nc(os.Args[1:], os.Stdin, os.Stdout, os.Stderr) }
