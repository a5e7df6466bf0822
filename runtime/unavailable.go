package runtime

import "github.com/containerd/containerd/errdefs"

// IsUnavailable reports whether err says containerd could not be reached
// (connection refused, reset or closed: containerd stopped or restarting),
// as opposed to containerd refusing or failing the call.
func IsUnavailable(err error) bool { return err != nil && errdefs.IsUnavailable(err) }
