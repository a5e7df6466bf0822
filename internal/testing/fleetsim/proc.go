package fleetsim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcUsage is a process's CPU time and resident memory.
type ProcUsage struct {
	CPUSeconds float64 // user + system
	RSSBytes   int64
}

// userHZ is the unit of /proc/<pid>/stat's times; the kernel exports
// USER_HZ = 100 on every architecture Linux runs containers on.
const userHZ = 100

// ReadProc reads pid's CPU time and RSS from /proc.
func ReadProc(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	u, err := parseStat(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	if u.RSSBytes, err = parseVmRSS(status); err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return u, nil
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line.
func parseStat(b []byte) (ProcUsage, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ProcUsage{}, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return ProcUsage{}, errors.New("too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return ProcUsage{}, err
	}
	return ProcUsage{CPUSeconds: float64(ut+st) / userHZ}, nil
}

func parseVmRSS(b []byte) (int64, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no VmRSS")
}
