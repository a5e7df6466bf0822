// Package netns creates, enters and removes persistent Linux network
// namespaces: a namespace is kept alive by a bind mount of its nsfs inode on
// a file, so it outlives the thread that created it and can be joined by
// path (an OCI runtime's linux.namespaces[].path, setns(2)).
//
// CreatePod and RemovePod do the same for the IPC and UTS namespaces a
// pod's containers share (with the pod's hostname set in the UTS one) and
// the pod's /dev/shm tmpfs.
//
// # What it promises
//
// No function changes the calling goroutine's (or any reusable thread's)
// network namespace: the work that needs another namespace runs on a fresh,
// locked OS thread that is discarded afterwards (the goroutine ends without
// runtime.UnlockOSThread, so the Go runtime terminates the thread instead of
// reusing it).
//
// Create and Remove are idempotent and serialised within the process, so
// concurrent calls for the same path do not stack mounts.
//
// # What it assumes
//
// Linux, CAP_SYS_ADMIN (root) and a mounted /proc. The directory holding the
// namespace files should not be shared with other tools that mount there.
package netns
