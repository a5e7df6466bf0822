package localcluster

import (
	"context"
	"syscall"
	"time"
)

// Restart stops one running component (SIGTERM, SIGKILL after 10s) and
// starts it again with the same command line (Stop, then Start), for fault
// and scale tests; its log goes on in the same file after a marker. It
// returns once the new process serves (see Start). stopped is when the old
// process was gone; onStopped (may be nil) is called then, before the new
// one starts.
func (s *State) Restart(ctx context.Context, name string, onStopped func()) (stopped time.Time, err error) {
	if err := s.Stop(name, syscall.SIGTERM); err != nil {
		return time.Time{}, err
	}
	stopped = time.Now()
	if onStopped != nil {
		onStopped()
	}
	return stopped, s.Start(ctx, name)
}
