// Package volume sets up and tears down pod volumes under the pod's
// directory (<rootDir>/pods/<uid>/volumes), with kubelet's layout and
// semantics: emptyDir (on disk, or Memory as a tmpfs sized by sizeLimit),
// hostPath (with kubelet's type checks), and the volumes whose files the
// agent writes (secret, configMap, downwardAPI and projected: service
// account tokens through TokenRequest, refreshed at 80 % of their
// lifetime; Secrets and ConfigMaps from getters such as pods/objcache;
// downwardAPI fields and resources), each on a tmpfs and written
// atomically with kubelet's ..data symlink swap. A volume that cannot be
// set up is a *MountError carrying kubelet's FailedMount message.
//
// An emptyDir of a pod with an fsGroup gets kubelet's volume ownership
// (group, setgid) once, behind kubelet's ready file. MakeRShared makes
// the agent's rootDir a shared mount at startup, as kubelet does, for
// mountPropagation.
//
// ContainerMounts maps a container's volumeMounts (with their
// mountPropagation, see Propagation) to runtime mounts;
// ContainerMountsWithSubPaths also prepares subPath and subPathExpr mounts
// (resolved safely inside the volume and bind-mounted under
// <podDir>/volume-subpaths). Setup is idempotent; Teardown unmounts before
// it removes, so it never deletes through a mount.
package volume
