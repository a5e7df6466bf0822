package config

import (
	"crypto/tls"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// tlsVersions are kubelet's names of TLS versions (tlsMinVersion).
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10,
	"VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

// tlsSuite looks a cipher suite up by the name kubelet accepts: Go's name
// of a suite crypto/tls implements, secure or not, or one of the two
// legacy CHACHA20 names without _SHA256. insecure reports a suite Go
// lists as having security issues (kubelet accepts it, and logs it).
func tlsSuite(name string) (id uint16, insecure, ok bool) {
	switch name {
	case "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305":
		return tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, false, true
	case "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305":
		return tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false, true
	}
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			return s.ID, false, true
		}
	}
	for _, s := range tls.InsecureCipherSuites() {
		if s.Name == name {
			return s.ID, true, true
		}
	}
	return 0, false, false
}

// NodeAPITLS returns the node API's cipher suites (nil: Go's defaults)
// and minimum TLS version from tlsCipherSuites and tlsMinVersion, which
// Validate has checked.
func (c *NodeAgentConfiguration) NodeAPITLS() (suites []uint16, minVersion uint16) {
	for _, n := range c.TLSCipherSuites {
		if id, _, ok := tlsSuite(n); ok {
			suites = append(suites, id)
		}
	}
	minVersion = tls.VersionTLS12 // kubelet's default
	if v, ok := tlsVersions[c.TLSMinVersion]; ok {
		minVersion = v
	}
	return suites, minVersion
}

// validateTLS checks tlsCipherSuites and tlsMinVersion as kubelet does
// when it starts its server (its messages), at load. Insecure suites are
// accepted with a warning, as kubelet accepts them with a log line.
func validateTLS(c *NodeAgentConfiguration) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for i, n := range c.TLSCipherSuites {
		_, insecure, ok := tlsSuite(n)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(field.NewPath("tlsCipherSuites").Index(i), n, fmt.Sprintf("Cipher suite %s not supported or doesn't exist", n)))
		case insecure:
			warnings = append(warnings, fmt.Sprintf("tlsCipherSuites[%d]: Use of insecure cipher detected: %s", i, n))
		}
	}
	if _, ok := tlsVersions[c.TLSMinVersion]; c.TLSMinVersion != "" && !ok {
		errs = append(errs, field.Invalid(field.NewPath("tlsMinVersion"), c.TLSMinVersion, fmt.Sprintf("unknown tls version %q", c.TLSMinVersion)))
	}
	if c.TLSMinVersion == "VersionTLS13" && len(c.TLSCipherSuites) > 0 {
		warnings = append(warnings, "tlsCipherSuites: TLS 1.3 cipher suites are not configurable, ignoring tlsCipherSuites (tlsMinVersion is VersionTLS13)")
	}
	return errs, warnings
}
