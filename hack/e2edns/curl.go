package main

// curl stands in for curl (Alpine's, in the upstream agnhost image) with
// the options the [Conformance] specs' exec pods and hooks pass it:
//
//	-s --silent  -S  -q  -g  -i  -I  -k --insecure  -f --fail  -L --location
//	-o FILE  -w FORMAT (%{http_code} only)  -X --request METHOD
//	-H --header "Name: value"  --connect-timeout SECONDS  -m --max-time SECONDS
//	--interface ADDRESS|INTERFACE (the HostPort spec's source address)
//
// The last non-option argument is the URL (http:// when it has no scheme).
// Exit status as curl's: 0 when a response came (whatever its status,
// unless -f: 22 for 400 and above), 6 when the host is not resolved, 7
// when the connection fails, 28 on a timeout, 45 when --interface names
// no usable address, 2 for an option not supported here (named in the
// message).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

type curlOptions struct {
	include, head, insecure, fail, follow bool
	output, writeOut, method, iface       string
	headers                               []string
	connectTimeout, maxTime               time.Duration
	url                                   string
}

func parseCurl(args []string) (curlOptions, error) {
	var o curlOptions
	value := func(i *int, name string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("option %s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	seconds := func(v, name string) (time.Duration, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("option %s: %q is not a number of seconds", name, v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		switch a {
		case "-s", "--silent", "-S", "--show-error", "-q", "-g", "--globoff", "-sS":
		case "-i", "--include":
			o.include = true
		case "-I", "--head":
			o.head = true
		case "-k", "--insecure":
			o.insecure = true
		case "-f", "--fail":
			o.fail = true
		case "-L", "--location":
			o.follow = true
		case "-o", "--output":
			o.output, err = value(&i, a)
		case "-w", "--write-out":
			o.writeOut, err = value(&i, a)
		case "--interface":
			o.iface, err = value(&i, a)
		case "-X", "--request":
			o.method, err = value(&i, a)
		case "-H", "--header":
			var h string
			if h, err = value(&i, a); err == nil {
				o.headers = append(o.headers, h)
			}
		case "--connect-timeout", "-m", "--max-time":
			var v string
			if v, err = value(&i, a); err == nil {
				var d time.Duration
				if d, err = seconds(v, a); err == nil {
					if a == "--connect-timeout" {
						o.connectTimeout = d
					} else {
						o.maxTime = d
					}
				}
			}
		default:
			if strings.HasPrefix(a, "-") && a != "-" {
				// Grouped short flags of the kinds above (-sIk, -qs).
				if !strings.HasPrefix(a, "--") && strings.Trim(a[1:], "sSqgiIkfL") == "" {
					o.include = o.include || strings.Contains(a, "i")
					o.head = o.head || strings.Contains(a, "I")
					o.insecure = o.insecure || strings.Contains(a, "k")
					o.fail = o.fail || strings.Contains(a, "f")
					o.follow = o.follow || strings.Contains(a, "L")
					continue
				}
				return o, fmt.Errorf("option %s is not supported by this stand-in for curl", a)
			}
			o.url = a
		}
		if err != nil {
			return o, err
		}
	}
	if o.url == "" {
		return o, errors.New("no URL specified")
	}
	if !strings.Contains(o.url, "://") {
		o.url = "http://" + o.url
	}
	if o.method == "" {
		o.method = http.MethodGet
		if o.head {
			o.method = http.MethodHead
		}
	}
	return o, nil
}

func curl(args []string, out, errOut io.Writer) int {
	o, err := parseCurl(args)
	if err != nil {
		fmt.Fprintln(errOut, "curl:", err)
		return 2
	}
	req, err := http.NewRequest(o.method, o.url, nil)
	if err != nil {
		fmt.Fprintln(errOut, "curl: (3)", err)
		return 3
	}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			continue // curl ignores a header without a colon as well
		}
		if strings.EqualFold(strings.TrimSpace(k), "Host") {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	dialer := &net.Dialer{Timeout: o.connectTimeout}
	if o.iface != "" {
		ip, err := interfaceAddr(o.iface)
		if err != nil {
			fmt.Fprintln(errOut, "curl: (45)", err)
			return 45
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}
	tr := &http.Transport{
		DialContext:     dialer.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: o.insecure}, //nolint:gosec // curl -k, as asked
		Proxy:           nil,
	}
	client := &http.Client{Transport: tr, Timeout: o.maxTime}
	if !o.follow {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	resp, err := client.Do(req)
	if err != nil {
		var dnsErr *net.DNSError
		var ne net.Error
		switch {
		case errors.As(err, &dnsErr):
			fmt.Fprintln(errOut, "curl: (6) Could not resolve host:", req.URL.Hostname())
			return 6
		case errors.As(err, &ne) && ne.Timeout():
			fmt.Fprintln(errOut, "curl: (28) Operation timed out:", err)
			return 28
		default:
			fmt.Fprintln(errOut, "curl: (7) Failed to connect:", err)
			return 7
		}
	}
	defer resp.Body.Close()
	dst := out
	if o.output != "" && o.output != "-" {
		f, err := os.Create(o.output)
		if err != nil {
			fmt.Fprintln(errOut, "curl: (23)", err)
			return 23
		}
		defer f.Close()
		dst = f
	}
	if o.include || o.head {
		fmt.Fprintf(dst, "%s %s\r\n", resp.Proto, resp.Status)
		_ = resp.Header.Write(dst)
		fmt.Fprint(dst, "\r\n")
	}
	if _, err := io.Copy(dst, resp.Body); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			fmt.Fprintln(errOut, "curl: (28) Operation timed out:", err)
			return 28
		}
		fmt.Fprintln(errOut, "curl: (56)", err)
		return 56
	}
	if o.writeOut != "" {
		fmt.Fprint(out, strings.ReplaceAll(strings.ReplaceAll(o.writeOut, "%{http_code}", fmt.Sprintf("%03d", resp.StatusCode)), `\n`, "\n"))
	}
	if o.fail && resp.StatusCode >= 400 {
		fmt.Fprintf(errOut, "curl: (22) The requested URL returned error: %d\n", resp.StatusCode)
		return 22
	}
	return 0
}

// interfaceAddr is the source address curl's --interface VALUE binds:
// VALUE itself when it is an address, else the first address (IPv4
// first) of the network interface so named. (curl also takes a host name;
// the specs pass an address, and a stand-in resolves nothing it need not.)
func interfaceAddr(v string) (net.IP, error) {
	if ip := net.ParseIP(v); ip != nil {
		return ip, nil
	}
	ifi, err := net.InterfaceByName(v)
	if err != nil {
		return nil, fmt.Errorf("couldn't bind to '%s': no such interface (host names are not supported by this stand-in)", v)
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("interface %s: %v", v, err)
	}
	var first net.IP
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if n.IP.To4() != nil {
				return n.IP, nil
			}
			if first == nil {
				first = n.IP
			}
		}
	}
	if first == nil {
		return nil, fmt.Errorf("couldn't bind to '%s': it has no address", v)
	}
	return first, nil
}
