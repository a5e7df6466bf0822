// Package volume sets up and tears down pod volumes under the pod's
// directory (<rootDir>/pods/<uid>/volumes), with kubelet's layout and
// semantics: emptyDir (on disk, or Memory as a tmpfs sized by sizeLimit),
// hostPath (with kubelet's type checks), and projected volumes (service
// account tokens through TokenRequest, refreshed at 80 % of their
// lifetime; configMaps; downwardAPI), written atomically with kubelet's
// ..data symlink swap. ContainerMounts maps a container's volumeMounts to
// runtime mounts. Setup is idempotent; Teardown unmounts before it
// removes, so it never deletes through a mount.
package volume
