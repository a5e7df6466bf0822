//go:build !linux

package shutdown

import "errors"

// SystemBus reports that graceful node shutdown needs systemd-logind
// (Linux).
func SystemBus() (Logind, error) {
	return nil, errors.New("graceful node shutdown needs systemd-logind (Linux only)")
}
