package cm

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetOOMScoreAdj writes v to an oom_score_adj file
// (/proc/<pid>/oom_score_adj; /proc/self/oom_score_adj for the agent).
func SetOOMScoreAdj(path string, v int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SetMaxOpenFiles sets this process's RLIMIT_NOFILE, soft and hard, to n
// (kubelet's maxOpenFiles); n 0 changes nothing.
func SetMaxOpenFiles(n int64) error {
	if n <= 0 {
		return nil
	}
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(n), Max: uint64(n)})
}
