package cm

import (
	"os"
	"strconv"
)

// AgentOOMScoreAdj is the agent's own oom_score_adj (kubelet's
// KubeletOOMScoreAdj, its default oomScoreAdj): below every pod's, so the
// kernel's OOM killer takes pods before the agent.
const AgentOOMScoreAdj = -999

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
