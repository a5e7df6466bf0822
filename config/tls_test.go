package config

import (
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"
)

// tlsCipherSuites and tlsMinVersion are read from both kinds of file by
// kubelet's names (Go's suite names, its legacy CHACHA20 names) without
// the unsupported warning; empty means Go's suites and TLS 1.2, as in
// kubelet. Insecure suites and suites under TLS 1.3 warn as kubelet logs.
func TestTLSFields(t *testing.T) {
	for _, tc := range []struct {
		desc, content string
		suites        []uint16
		min           uint16
		warning       string
	}{
		{"nodeagent defaults", hdr, nil, tls.VersionTLS12, ""},
		{"kubelet defaults", kubeletHdr, nil, tls.VersionTLS12, ""},
		{"kubelet values", kubeletHdr + "tlsCipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305]\ntlsMinVersion: VersionTLS12\n",
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}, tls.VersionTLS12, ""},
		{"nodeagent TLS 1.3", hdr + "tlsMinVersion: VersionTLS13\n", nil, tls.VersionTLS13, ""},
		{"TLS 1.0 is kubelet's too", kubeletHdr + "tlsMinVersion: VersionTLS10\n", nil, tls.VersionTLS10, ""},
		{"insecure suite", kubeletHdr + "tlsCipherSuites: [TLS_RSA_WITH_RC4_128_SHA]\n", []uint16{tls.TLS_RSA_WITH_RC4_128_SHA}, tls.VersionTLS12,
			"tlsCipherSuites[0]: Use of insecure cipher detected: TLS_RSA_WITH_RC4_128_SHA"},
		{"suites under TLS 1.3", hdr + "tlsCipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\ntlsMinVersion: VersionTLS13\n",
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, tls.VersionTLS13,
			"tlsCipherSuites: TLS 1.3 cipher suites are not configurable, ignoring tlsCipherSuites (tlsMinVersion is VersionTLS13)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{tc.warning}; tc.warning == "" && len(warnings) != 0 || tc.warning != "" && !slices.Equal(warnings, want) {
				t.Fatalf("warnings %q, want %q", warnings, tc.warning)
			}
			suites, min := cfg.NodeAPITLS()
			if !slices.Equal(suites, tc.suites) || min != tc.min {
				t.Errorf("got %v %x, want %v %x", suites, min, tc.suites, tc.min)
			}
		})
	}
}

// Unknown names are refused at load with kubelet's messages
// (cliflag.TLSCipherSuites, cliflag.TLSVersion), naming the field.
func TestTLSFieldsRefused(t *testing.T) {
	_, _, err := DecodeBytes("c.yaml", []byte(kubeletHdr+"tlsCipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_NOPE]\ntlsMinVersion: VersionTLS14\n"))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("DecodeBytes: %v, want a configuration error", err)
	}
	want := []string{
		`c.yaml:3: tlsCipherSuites[1]: Invalid value: "TLS_NOPE": Cipher suite TLS_NOPE not supported or doesn't exist`,
		`c.yaml:4: tlsMinVersion: Invalid value: "VersionTLS14": unknown tls version "VersionTLS14"`,
	}
	if got := cerr.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
