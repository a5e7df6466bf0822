// Package cm lays out pods' cgroups as kubelet's container manager does
// (pkg/kubelet/cm): a kubepods cgroup under the configured root, sized by
// node allocatable; QoS level cgroups kubepods/burstable and
// kubepods/besteffort; a cgroup per pod (kubepods/pod<uid> for Guaranteed
// pods, kubepods/<qos>/pod<uid> otherwise) limited by the pod's summed
// requests and limits; the containers' cgroups below their pod's. With the
// systemd driver the same hierarchy is made of slices (kubepods.slice,
// kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice) through
// systemd's D-Bus API.
//
// The cgroups are written by runc's cgroup library
// (github.com/opencontainers/cgroups: fs for cgroup v1, fs2 for v2,
// systemd for either), never by hand. The naming and the resource
// arithmetic are pure functions (names.go, qos.go, resources.go), tested
// without cgroups; Manager applies them.
package cm
