// Package network is nodeagent's CNI runtime and the pod name service
// files: it attaches a pod's network namespace to the cluster network
// through the node's CNI plugins, reports whether the node's network is
// ready, and computes the resolv.conf, /etc/hosts and service-link
// environment kubelet gives a pod. It is the only package that imports the
// CNI library (github.com/containernetworking/cni/libcni).
//
// # What it promises
//
// Configuration, as kubelet (dockershim) and containerd load it: the
// network is the first file of ConfDir, in lexical order, with the
// extension .conflist, .conf or .json that parses, has at least one plugin
// and whose plugins are all found in BinDirs and support its cniVersion.
// Run reloads it when ConfDir changes, and rescans periodically while no
// configuration is usable (plugins are often installed after their
// configuration). Status returns nil while a configuration is loaded and
// otherwise an error that matches ErrNotReady and reads exactly as
// kubelet's Ready condition message:
//
//	container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized
//
// SetUp runs the plugins' ADD for a pod's network namespace and returns
// the pod's addresses, the ones its interface has. It is idempotent: when
// the pod is already attached in that namespace (its eth0 holds the
// recorded addresses) it returns the recorded result without calling a
// plugin; an attachment to another or a vanished namespace, or one
// interrupted by a crash, is deleted first. A failed ADD
// is rolled back with DEL before SetUp returns.
//
// TearDown runs DEL with the configuration and arguments recorded at ADD
// (libcni's cache under CacheDir), not with the current configuration, so
// it works after the configuration changed or was removed and after an
// agent restart. It is idempotent: a pod with nothing recorded is not
// attached and TearDown returns nil. Records are removed only after DEL
// succeeded, so a failed TearDown can be retried.
//
// Attached lists the pods TearDown still has work for (recorded or
// interrupted attachments), so that an agent restarted after losing track
// of a pod can tear it down by UID alone.
//
// Check runs the plugins' CHECK for an attached pod; ErrCheckNotSupported
// when the network's cniVersion predates CHECK.
//
// SetUp, TearDown and Check for different pods may run concurrently; calls
// for the same pod are serialised. Errors wrap their cause with %w:
// ErrNotReady (no usable configuration: wait and retry), ErrInvalidOptions
// (the pod's annotations or options are wrong: retrying does not help),
// anything else is a plugin failure (retry with back-off). Retrying is the
// caller's concern; the package never sleeps.
//
// The DNS, hosts and service-link functions are pure: they take the pod,
// the agent's settings and the host's files' content and return what
// kubelet would write.
//
// # What it assumes
//
// Linux and root (the plugins need CAP_NET_ADMIN and CAP_SYS_ADMIN). The
// caller owns the network namespace (internal/netns): it creates it before
// SetUp and removes it only after TearDown succeeded (plugins such as
// bridge find what to delete through the pod's interface). The pod UID is
// the CNI container ID (kubelet uses the sandbox container's ID; nodeagent
// has no sandbox container), and the interface in the pod is eth0.
package network
