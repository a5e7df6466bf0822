package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/platforms"
	"golang.org/x/sys/unix"
)

// LabelPinned on an image record pins the image: image garbage collection
// never removes it (containerd's CRI label, value "pinned").
const LabelPinned = "io.cri-containerd.pinned"

// RemoveImage removes every name (image record) of the namespace whose
// config is id, the last one synchronously so that containerd's garbage
// collector has released the content and snapshots no other image or
// container uses when it returns. Removing an absent image is not an error.
func (r *Runtime) RemoveImage(ctx context.Context, id string) error {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	is := r.client.ImageService()
	all, err := is.List(ctx)
	if err != nil {
		return fmt.Errorf("runtime: remove image %s: %w", id, convertErr(err))
	}
	var names []string
	for _, img := range all {
		conf, err := img.Config(ctx, r.client.ContentStore(), platforms.Default())
		if err == nil && conf.Digest.String() == id {
			names = append(names, img.Name)
		}
	}
	for i, n := range names {
		var opts []images.DeleteOpt
		if i == len(names)-1 {
			opts = append(opts, images.SynchronousDelete())
		}
		if err := is.Delete(ctx, n, opts...); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
			return fmt.Errorf("runtime: remove image %s (%s): %w", id, n, convertErr(err))
		}
	}
	r.forgetFacts(id)
	return nil
}

// PinImage labels the image record ref (short or fully qualified) as
// pinned.
func (r *Runtime) PinImage(ctx context.Context, ref string) error {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	img, err := r.lookupImage(ctx, ref)
	if err != nil {
		return fmt.Errorf("runtime: pin image: %w", err)
	}
	if img.Labels == nil {
		img.Labels = map[string]string{}
	}
	img.Labels[LabelPinned] = "pinned"
	if _, err := r.client.ImageService().Update(ctx, img, "labels."+LabelPinned); err != nil {
		return fmt.Errorf("runtime: pin image %s: %w", ref, convertErr(err))
	}
	return nil
}

// ImageFSRoot returns the directory of containerd's image filesystem: the
// root of the configured snapshotter (where unpacked layers live, what
// containerd's CRI reports as its image filesystem), else the content
// store's root.
func (r *Runtime) ImageFSRoot(ctx context.Context) (string, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	for _, f := range []string{
		"type==io.containerd.snapshotter.v1,id==" + r.opts.Snapshotter,
		"type==io.containerd.content.v1,id==content",
	} {
		resp, err := r.client.IntrospectionService().Plugins(ctx, []string{f})
		if err != nil {
			return "", fmt.Errorf("runtime: introspection: %w", convertErr(err))
		}
		for _, p := range resp.Plugins {
			if root := p.Exports["root"]; root != "" {
				return root, nil
			}
		}
	}
	return "", fmt.Errorf("runtime: %w: no snapshotter or content root exported by containerd", ErrNotFound)
}

// FSUsage is a filesystem's size and the space available to unprivileged
// users, in bytes (statfs: blocks × fragment size, bavail × fragment size).
type FSUsage struct {
	Capacity  int64
	Available int64
}

// StatFS measures the filesystem holding path.
func StatFS(path string) (FSUsage, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return FSUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	return FSUsage{Capacity: int64(s.Blocks) * int64(s.Frsize), Available: int64(s.Bavail) * int64(s.Frsize)}, nil
}
