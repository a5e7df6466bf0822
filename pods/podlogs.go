package pods

import (
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/crilog"
)

// Pod log directories. Containers log to
// Options.PodLogsDir/<ns>_<pod>_<uid>/<container>/<attempt>.log (the
// containerLogPath). Agents before podLogsDir wrote
// Options.RootDir/logs/<ns>_<pod>_<uid>/...; the logger process of a
// container they started keeps writing there after an upgrade (its path is
// the container's own), so that layout is still read (the node API) and
// removed with its pod (the worker's cleanup, and orphans below).
//
// A pod's log directory goes when its worker ends while the manager runs:
// the worker has removed the pod's containers by then. One left behind (an
// agent stopped in between) makes the pod an orphan at the next start,
// whose clean-up ends the same way, as kubelet's container GC removes the
// log directories of pods that are gone.

// legacyLogsDir is where agents before podLogsDir kept container logs.
func (m *Manager) legacyLogsDir() string { return filepath.Join(m.opts.RootDir, "logs") }

// removePodLogs removes the pod's log directories, in both layouts, by UID
// (an orphan's name may be unknown).
func (m *Manager) removePodLogs(uid types.UID) {
	for _, root := range []string{m.opts.PodLogsDir, m.legacyLogsDir()} {
		dirs, _ := filepath.Glob(filepath.Join(root, "*_"+globEscape(string(uid))))
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				m.log.Warn("cannot remove the pod's logs", "podUID", uid, "path", d, "err", err)
			}
		}
	}
}

// podLogUIDs are the pods that have a log directory, in either layout.
func (m *Manager) podLogUIDs() []types.UID {
	var out []types.UID
	for _, root := range []string{m.opts.PodLogsDir, m.legacyLogsDir()} {
		es, _ := os.ReadDir(root)
		for _, e := range es {
			if e.IsDir() {
				if uid := crilog.PodUIDFromLogDir(e.Name()); uid != "" {
					out = append(out, types.UID(uid))
				}
			}
		}
	}
	return out
}

// globEscape quotes the glob metacharacters of a UID (they are not valid
// in one, but a directory name on disk is anything).
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
