//go:build !linux

package nodestatus

import "errors"

var errNotLinux = errors.New("nodestatus: only Linux is supported")

func uname() (string, error)         { return "", errNotLinux }
func statfs(string) (FSStats, error) { return FSStats{}, errNotLinux }
