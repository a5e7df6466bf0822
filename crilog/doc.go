// Package crilog writes and reads container log files in the CRI format that
// kubelet and containerd's CRI plugin use:
//
//	<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>\n
//
// A line longer than MaxLineSize is split into records tagged P (partial)
// followed by a last record tagged F (full), so that readers can join them.
//
// The writer runs as a separate process per container, started by
// containerd's shim through a binary:// log URI (see LoggerArgs and
// RunLogger): it reads the container's stdout and stderr pipes and appends
// records to the container's log file, rotating it when it would exceed
// Rotation.MaxSize and keeping at most Rotation.MaxFiles files (the live
// file and rotated ones named <log>.<UTC yyyymmdd-hhmmss>, as kubelet names
// them; rotated files are not compressed). It depends on nothing but the
// file system, so it keeps draining the container's output whatever the
// agent does: an agent that is down, restarting or slow to read never
// blocks a container's writes and loses no line. If the file cannot be
// written the records are dropped (and reported on the logger's stderr)
// rather than blocking the container.
//
// A writer started by the shim (which names the container in CONTAINER_ID)
// also answers drain requests (Drain, drain.go): it copies what the
// container's pipes hold and writes an unterminated last line as a partial
// record, then answers. The shim keeps its ends of the pipes until the task
// is deleted, so EOF comes only then; a drain lets the agent report an
// exited container with its log complete without waiting for that.
//
// The reader (ReadLogs) serves kubelet's containerLogs query options over the
// rotated files and the live one, and follows the live file across
// rotations. Lines that are not CRI records (the raw output of containers
// started by an agent older than this format) are shown as they are.
//
// layout.go names the files as kubelet does: <podLogsDir>/<ns>_<pod>_<uid>/
// <container>/<attempt>.log and the /var/log/containers symlinks log
// shippers read.
package crilog
