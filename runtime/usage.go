package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd"
)

// WritableLayerUsage returns the bytes a container has written to its
// root filesystem: the usage of its active snapshot as the snapshotter
// measures it (overlayfs walks the snapshot's upper directory, so the
// cost grows with the files the container wrote, not with its image).
func (r *Runtime) WritableLayerUsage(ctx context.Context, id string) (int64, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("runtime: container %s: %w", id, convertErr(err))
	}
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return 0, fmt.Errorf("runtime: container %s: %w", id, convertErr(err))
	}
	if info.SnapshotKey == "" {
		return 0, nil
	}
	u, err := r.client.SnapshotService(info.Snapshotter).Usage(ctx, info.SnapshotKey)
	if err != nil {
		return 0, fmt.Errorf("runtime: writable layer of container %s: %w", id, convertErr(err))
	}
	return u.Size, nil
}
