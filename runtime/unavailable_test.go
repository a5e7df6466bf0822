package runtime

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What containerd's client returns when containerd is gone (a gRPC status
// Unavailable) is told apart from containerd refusing or failing a call,
// also once converted and wrapped as the adapter does.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection reset", status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"connection refused", status.Error(codes.Unavailable, "connection error: dial unix: connect: connection refused"), true},
		{"not found", status.Error(codes.NotFound, "no such container"), false},
		{"start failed", status.Error(codes.Unknown, "failed to create shim task: exec: \"nope\": executable file not found"), false},
		{"deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{"plain", errors.New("unavailable"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err
			if err != nil {
				err = fmt.Errorf("runtime: start c1: create task: %w", convertErr(err))
			}
			if got := IsUnavailable(err); got != tc.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
