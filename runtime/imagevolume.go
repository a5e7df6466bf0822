package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/platforms"
	"github.com/containerd/containerd/snapshots"
	"github.com/opencontainers/image-spec/identity"
	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

// Image volumes (the pod volume source `image`, feature ImageVolume): the
// unpacked filesystem of an OCI image, mounted read-only. Each is a view
// snapshot of the image's layers in the configured snapshotter (what
// containerd's CRI makes for kubelet), mounted on a directory of the
// pod's, from where it is bind-mounted into containers like any volume.
// The snapshot is labelled with the image's ID, so that image garbage
// collection sees the image in use (ListImageVolumes), and as a
// garbage-collection root, so that containerd keeps it and its layers
// until UnmountImageVolume removes it.
const (
	// LabelImageVolumeImage is the ID (config digest) of the image a view
	// snapshot shows.
	LabelImageVolumeImage = "nodeagent.io/image-volume.image"
	// LabelImageVolumePod is the UID of the pod the view belongs to.
	LabelImageVolumePod = "nodeagent.io/image-volume.pod"
	labelGCRoot         = "containerd.io/gc.root"
)

// MountImageVolume mounts the filesystem of image ref (present, as the
// image puller left it) read-only on target, through a view snapshot
// named key that belongs to pod podUID. It is idempotent: a target that
// is already a mount point (an agent restart) is left as it is.
func (r *Runtime) MountImageVolume(ctx context.Context, ref, key, podUID, target string) error {
	if mounted, err := isMountPoint(target); err != nil {
		return fmt.Errorf("runtime: image volume %s: %w", target, err)
	} else if mounted {
		return nil
	}
	ctx, cancel := r.startCtx(ctx)
	defer cancel()
	rec, err := r.lookupImage(ctx, ref)
	if err != nil {
		return fmt.Errorf("runtime: image volume: %w", err)
	}
	img := containerd.NewImageWithPlatform(r.client, rec, platforms.Default())
	if ok, err := img.IsUnpacked(ctx, r.opts.Snapshotter); err != nil || !ok {
		if err := img.Unpack(ctx, r.opts.Snapshotter); err != nil {
			return fmt.Errorf("runtime: unpack image %s: %w", ref, convertErr(err))
		}
	}
	conf, err := img.Config(ctx)
	if err != nil {
		return fmt.Errorf("runtime: image %s: %w", ref, convertErr(err))
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return fmt.Errorf("runtime: image %s: layers: %w", ref, convertErr(err))
	}
	sn := r.client.SnapshotService(r.opts.Snapshotter)
	mounts, err := sn.Mounts(ctx, key)
	if errors.Is(convertErr(err), ErrNotFound) {
		mounts, err = sn.View(ctx, key, identity.ChainID(diffIDs).String(), snapshots.WithLabels(map[string]string{
			LabelImageVolumeImage: conf.Digest.String(),
			LabelImageVolumePod:   podUID,
			labelGCRoot:           time.Now().UTC().Format(time.RFC3339),
		}))
	}
	if err != nil {
		return fmt.Errorf("runtime: image volume %s: view of %s: %w", key, ref, convertErr(err))
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("runtime: image volume %s: %w", key, err)
	}
	// The view's mounts are read-only (a bind of the one layer, or an
	// overlay with lower directories only); ro on the bind keeps it so.
	for i := range mounts {
		if mounts[i].Type == "bind" {
			mounts[i].Options = append(mounts[i].Options, "ro")
		}
	}
	if err := mount.All(mounts, target); err != nil {
		return fmt.Errorf("runtime: image volume %s: mount %s: %w", key, ref, err)
	}
	return nil
}

// UnmountImageVolume unmounts target (if mounted), removes the directory
// and the view snapshot key. Absent ones are not errors.
func (r *Runtime) UnmountImageVolume(ctx context.Context, key, target string) error {
	if err := mount.UnmountAll(target, unix.MNT_DETACH); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runtime: image volume %s: unmount: %w", key, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runtime: image volume %s: %w", key, err)
	}
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	err := r.client.SnapshotService(r.opts.Snapshotter).Remove(ctx, key)
	if err != nil && !errors.Is(convertErr(err), ErrNotFound) {
		return fmt.Errorf("runtime: image volume %s: remove view: %w", key, convertErr(err))
	}
	return nil
}

// ImageVolume is a view snapshot made by MountImageVolume.
type ImageVolume struct {
	Key     string
	ImageID string
	PodUID  string
}

// ListImageVolumes lists the view snapshots of image volumes.
func (r *Runtime) ListImageVolumes(ctx context.Context) ([]ImageVolume, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	var out []ImageVolume
	err := r.client.SnapshotService(r.opts.Snapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if id, ok := info.Labels[LabelImageVolumeImage]; ok {
			out = append(out, ImageVolume{Key: info.Name, ImageID: id, PodUID: info.Labels[LabelImageVolumePod]})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: list image volumes: %w", convertErr(err))
	}
	return out, nil
}

// isMountPoint reports whether path is a mount point of this mount
// namespace (false when it does not exist).
func isMountPoint(path string) (bool, error) {
	p, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ms, err := mountinfo.Read()
	if err != nil {
		return false, err
	}
	m, ok := mountinfo.Containing(ms, p)
	return ok && m.MountPoint == p, nil
}
