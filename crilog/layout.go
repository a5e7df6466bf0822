package crilog

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where container logs live on a node, as kubelet lays them out
// (kuberuntime's BuildPodLogsDirectory, buildContainerLogsPath and
// logSymlink):
//
//	<podLogsDir>/<namespace>_<pod>_<uid>/<container>/<attempt>.log
//	<containerLogsDir>/<pod>_<namespace>_<container>-<containerID>.log -> the above
//
// Log shippers (Fluent Bit, Vector, Promtail, the Datadog and Elastic
// agents) read one or the other; the symlink's name is parsed for the pod,
// namespace, container and container ID.
const (
	// DefaultPodLogsDir is kubelet's podLogsDir default.
	DefaultPodLogsDir = "/var/log/pods"
	// DefaultContainerLogsDir is where kubelet keeps the symlinks (a
	// constant in kubelet, legacyContainerLogsDir).
	DefaultContainerLogsDir = "/var/log/containers"

	// logPathDelimiter joins namespace, pod name and UID in a pod's log
	// directory name.
	logPathDelimiter = "_"
	symlinkSuffix    = ".log"
	// maxFileNameLen is ext4's limit on a file name; longer symlink names
	// are cut, as kubelet cuts them.
	maxFileNameLen = 255
)

// PodLogDir is a pod's log directory under podLogsDir.
func PodLogDir(podLogsDir, namespace, name, uid string) string {
	return filepath.Join(podLogsDir, strings.Join([]string{namespace, name, uid}, logPathDelimiter))
}

// ContainerLogPath is the log file of one attempt (kubelet's restart
// count) of a container.
func ContainerLogPath(podLogsDir, namespace, name, uid, container string, attempt uint32) string {
	return filepath.Join(PodLogDir(podLogsDir, namespace, name, uid), container, strconv.FormatUint(uint64(attempt), 10)+".log")
}

// PodUIDFromLogDir is the pod UID in a pod log directory's name (the part
// after the last "_"; a bare UID is accepted, as kubelet does).
func PodUIDFromLogDir(name string) string {
	parts := strings.Split(name, logPathDelimiter)
	return parts[len(parts)-1]
}

// SymlinkPath is the symlink to a container's live log file in
// containerLogsDir, named as kubelet names it: <pod>_<namespace>_<container>-<id>.log,
// cut to 255 bytes.
func SymlinkPath(containerLogsDir, podName, namespace, container, containerID string) string {
	name := podName + "_" + namespace + "_" + container + "-" + containerID
	if len(name) > maxFileNameLen-len(symlinkSuffix) {
		name = name[:maxFileNameLen-len(symlinkSuffix)]
	}
	return filepath.Join(containerLogsDir, name+symlinkSuffix)
}

// ContainerIDFromSymlink is the container ID at the end of a symlink's
// name (after its last "-"), or "" when the name has none of at least 6
// characters (kubelet's getContainerIDFromLegacyLogSymlink).
func ContainerIDFromSymlink(path string) string {
	base := filepath.Base(path)
	if !strings.HasSuffix(base, symlinkSuffix) {
		return ""
	}
	i := strings.LastIndex(base, "-")
	if i < 0 {
		return ""
	}
	id := strings.TrimSuffix(base[i+1:], symlinkSuffix)
	if len(id) < 6 {
		return ""
	}
	return id
}

// LinkContainerLog points the container's symlink at logPath, replacing
// a link of the same name (an agent restarted between creating and
// recording it). The directory is created if missing (kubelet creates
// /var/log/containers with mode 0755).
func LinkContainerLog(link, logPath string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	if cur, err := os.Readlink(link); err == nil && cur == logPath {
		return nil
	}
	err := os.Symlink(logPath, link)
	if errors.Is(err, os.ErrExist) {
		if err = os.Remove(link); err == nil {
			err = os.Symlink(logPath, link)
		}
	}
	return err
}

// UnlinkContainerLog removes a container's symlink; a missing one is not
// an error.
func UnlinkContainerLog(link string) error {
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
