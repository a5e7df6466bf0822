package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/containerd/containerd"
	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	apitypes "github.com/containerd/containerd/api/types"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// IDMapping maps Size IDs from ContainerID in a user namespace to HostID.
type IDMapping struct {
	ContainerID, HostID, Size uint32
}

// UserNamespace is a container's own user namespace (a pod with
// hostUsers: false): the pod's UID and GID mappings. Every container of
// the pod gets one with the same mappings, so that they own the same host
// IDs; the pod's network, IPC and UTS namespaces stay the host's user
// namespace's.
type UserNamespace struct {
	UIDs, GIDs []IDMapping
	// Path is the pod's user namespace to join (a bind mount, see
	// internal/netns CreateUserPod), which owns the pod's network, IPC and
	// UTS namespaces; "" gives the container a new one with the mappings.
	Path string
}

// ErrUserNamespacesUnsupported: the runtime cannot run a container in a
// user namespace as kubelet requires it (containerd's CRI condition:
// containerd 2.0 or later, whose runtime reports the "user" namespace and
// idmapped mounts).
var ErrUserNamespacesUnsupported = errors.New("runtime does not support user namespaces")

// runtimeFeatures is the part of an OCI runtime's features document
// (`runc features`, runtime-spec features.Features) that says whether it
// can make user namespaces and idmapped mounts.
type runtimeFeatures struct {
	Linux *struct {
		Namespaces      []string `json:"namespaces"`
		MountExtensions *struct {
			IDMap *struct {
				Enabled *bool `json:"enabled"`
			} `json:"idmap"`
		} `json:"mountExtensions"`
	} `json:"linux"`
}

// supportsUserns is containerd CRI's test (supportsCRIUserns): the runtime
// knows the user namespace and has idmapped mounts enabled. runc before
// 1.2 has no mountExtensions and fails it.
func (f runtimeFeatures) supportsUserns() bool {
	if f.Linux == nil || !slices.Contains(f.Linux.Namespaces, "user") {
		return false
	}
	m := f.Linux.MountExtensions
	return m != nil && m.IDMap != nil && m.IDMap.Enabled != nil && *m.IDMap.Enabled
}

// SupportsUserNamespaces reports whether containers of runtimeType (""
// for runc) can run in a user namespace with idmapped volume mounts. It
// asks containerd for the runtime's features as containerd's CRI does for
// kubelet (introspection PluginInfo of the task plugin, containerd 2.0 and
// later); an older containerd, which cannot answer, does not.
func (r *Runtime) SupportsUserNamespaces(ctx context.Context, runtimeType string) (bool, error) {
	if runtimeType == "" {
		runtimeType = DefaultRuntimeType
	}
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	rr := &apitypes.RuntimeRequest{RuntimePath: runtimeType}
	if o, ok := r.runtimeOptions(runtimeType).(proto.Message); ok && o != nil {
		a, err := anypb.New(o)
		if err != nil {
			return false, err
		}
		rr.Options = a
	}
	opts, err := anypb.New(rr)
	if err != nil {
		return false, err
	}
	resp, err := introspectionapi.NewIntrospectionClient(r.client.Conn()).PluginInfo(ctx, &introspectionapi.PluginInfoRequest{
		Type: "io.containerd.runtime.v2", ID: "task", Options: opts,
	})
	if err != nil {
		if errdefs.IsNotImplemented(errdefs.FromGRPC(err)) {
			return false, nil // containerd before 2.0 has no PluginInfo
		}
		if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded) {
			return false, fmt.Errorf("runtime: introspect runtime %s: %w", runtimeType, convertErr(err))
		}
		// As containerd's CRI: a runtime whose features cannot be read
		// has none.
		r.opts.Logger.Info("cannot read the runtime's features; no user namespaces", "runtimeType", runtimeType, "err", err)
		return false, nil
	}
	if resp.Extra == nil {
		return false, nil
	}
	var info apitypes.RuntimeInfo
	if err := proto.Unmarshal(resp.Extra.GetValue(), &info); err != nil {
		return false, fmt.Errorf("runtime: runtime info of %s: %w", runtimeType, err)
	}
	if info.Features == nil {
		return false, nil
	}
	var f runtimeFeatures
	if err := json.Unmarshal(info.Features.GetValue(), &f); err != nil {
		return false, fmt.Errorf("runtime: features of %s: %w", runtimeType, err)
	}
	return f.supportsUserns(), nil
}

// userNSSpecOpts gives the container a user namespace of its own with the
// mappings, as containerd's CRI does for a pod sandbox in POD mode.
func userNSSpecOpts(u *UserNamespace) oci.SpecOpts {
	if u.Path == "" {
		return oci.WithUserNamespace(ociIDMappings(u.UIDs), ociIDMappings(u.GIDs))
	}
	// The namespace's path and its mappings, as containerd's CRI passes
	// them (runc checks that they match).
	return oci.Compose(
		oci.WithUserNamespace(ociIDMappings(u.UIDs), ociIDMappings(u.GIDs)),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UserNamespace, Path: u.Path}),
	)
}

func ociIDMappings(ms []IDMapping) []specs.LinuxIDMapping {
	out := make([]specs.LinuxIDMapping, 0, len(ms))
	for _, m := range ms {
		out = append(out, specs.LinuxIDMapping{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Size})
	}
	return out
}

// idmapMounts makes the container's bind mounts (its volumes and the
// files the agent gives it) idmapped with the pod's mappings, as kubelet
// asks of the runtime (kuberuntime sets each CRI mount's uid/gid
// mappings): a file the host's UID 0 owns is root's in the container,
// and what the container writes is owned by its host IDs.
func idmapMounts(ms []specs.Mount, u *UserNamespace) {
	for i := range ms {
		ms[i].UIDMappings = ociIDMappings(u.UIDs)
		ms[i].GIDMappings = ociIDMappings(u.GIDs)
	}
}

// hostRoot is the host IDs of the namespace's root (ContainerID 0).
func (u *UserNamespace) hostRoot() (uid, gid uint32, ok bool) {
	find := func(ms []IDMapping) (uint32, bool) {
		for _, m := range ms {
			if m.ContainerID == 0 && m.Size > 0 {
				return m.HostID, true
			}
		}
		return 0, false
	}
	uid, ok1 := find(u.UIDs)
	gid, ok2 := find(u.GIDs)
	return uid, gid, ok1 && ok2
}

// validate: the mappings must be non-empty and map container ID 0 (the
// snapshot is shifted to the root's host IDs).
func (u *UserNamespace) validate() error {
	if len(u.UIDs) == 0 || len(u.GIDs) == 0 {
		return errors.New("userNamespace needs UID and GID mappings")
	}
	if _, _, ok := u.hostRoot(); !ok {
		return errors.New("userNamespace must map container ID 0")
	}
	return nil
}

// Label of a container in a user namespace: the host UID:GID its
// namespace's root has, for the owner of its stdio (StartContainer).
const labelUserNSRoot = labelPrefix + "userns-root"

// remappedSnapshot is the container's rootfs with its files owned by the
// namespace's IDs (containerd's remapped snapshot: a copy of the image's
// layers chowned once per mapping, shared by containers with the same
// mapping), so that the container's root owns its root filesystem.
func remappedSnapshot(id string, img containerd.Image, u *UserNamespace) containerd.NewContainerOpts {
	uid, gid, _ := u.hostRoot()
	return containerd.WithRemappedSnapshot(id, img, uid, gid)
}

// withIOOwner makes the shim create the container's stdio pipes owned by
// the namespace's root, as containerd's CRI does for user namespaces
// (WithUIDOwner/WithGIDOwner), keeping the runtime options (systemd
// cgroups) that task options replace.
func withIOOwner(base any, uid, gid uint32) containerd.NewTaskOpts {
	return func(_ context.Context, _ *containerd.Client, ti *containerd.TaskInfo) error {
		o := &runcoptions.Options{}
		if b, ok := base.(*runcoptions.Options); ok && b != nil {
			o = proto.Clone(b).(*runcoptions.Options)
		}
		o.IoUid, o.IoGid = uid, gid
		ti.Options = o
		return nil
	}
}
