package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/platforms"
	"github.com/distribution/reference"
)

// NormalizeImageRef returns the fully qualified form of an image reference,
// as Docker and kubelet read it: "busybox" is
// "docker.io/library/busybox:latest", "nodeagent/busybox:test" is
// "docker.io/nodeagent/busybox:test"; a reference with both a tag and a
// digest keeps only the digest. Images are stored in containerd under this
// form (a pull stores it, an import should), so that a pod's short name and
// the stored name match. A reference that is not valid (upper case, bad
// characters) yields an error.
func NormalizeImageRef(ref string) (string, error) {
	if ref == "" {
		return "", errors.New("empty image reference")
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return named.String(), nil
}

// GetImage returns the image stored under ref, which may be the short or the
// fully qualified form (see NormalizeImageRef). An image that is absent, or
// whose content for this platform is missing, yields an error matching
// ErrNotFound. Names lists every reference to the same image config, as in
// ListImages.
func (r *Runtime) GetImage(ctx context.Context, ref string) (Image, error) {
	ctx, cancel := r.callCtx(ctx)
	defer cancel()
	img, err := r.lookupImage(ctx, ref)
	if err != nil {
		return Image{}, fmt.Errorf("runtime: get image: %w", err)
	}
	return r.imageInfo(ctx, img)
}

// lookupImage finds the image record for ref: first under the normalised
// name, then (for images stored under a name that is not normalised, such
// as one imported by hand) under ref itself.
func (r *Runtime) lookupImage(ctx context.Context, ref string) (images.Image, error) {
	name, err := NormalizeImageRef(ref)
	if err != nil {
		return images.Image{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	is := r.client.ImageService()
	img, err := is.Get(ctx, name)
	if err != nil && name != ref && errors.Is(convertErr(err), ErrNotFound) {
		img, err = is.Get(ctx, ref)
	}
	if err != nil {
		return images.Image{}, fmt.Errorf("image %s: %w", ref, convertErr(err))
	}
	return img, nil
}

// imageInfo describes one image record, with the names of every record that
// points to the same target.
func (r *Runtime) imageInfo(ctx context.Context, img images.Image) (Image, error) {
	if _, err := r.factsOf(ctx, img); err != nil {
		return Image{}, fmt.Errorf("runtime: image %s: no usable config for %s: %w",
			img.Name, platforms.DefaultString(), convertErr(err))
	}
	same, err := r.client.ImageService().List(ctx, "target.digest=="+img.Target.Digest.String())
	if err != nil || len(same) == 0 {
		same = []images.Image{img}
	}
	out, err := r.imagesFrom(ctx, same)
	if err != nil {
		return Image{}, err
	}
	for _, i := range out {
		for _, n := range i.Names {
			if n == img.Name {
				return i, nil
			}
		}
	}
	// Not described: imagesFrom skips an image whose config it could not
	// read (it fails when that was for want of time: a slow containerd
	// says nothing about the image, which was just read; absent, it would
	// be pulled, with pull policy IfNotPresent, which an offline node
	// cannot, or refused with Never). Only an image that went while there
	// was time is gone.
	if err := ctx.Err(); err != nil {
		return Image{}, fmt.Errorf("runtime: image %s: %w", img.Name, convertErr(err))
	}
	return Image{}, fmt.Errorf("runtime: image %s: %w: vanished while being inspected", img.Name, ErrNotFound)
}

// contentFacts is what an image's content says for this platform: the
// config digest (the image ID) and the size of the manifest, config and
// layers. Content is addressed by digest, so the image's target digest
// fixes both.
type contentFacts struct {
	id   string
	size int64
}

// factsOf returns img's content facts, reading its index, manifest and
// config from containerd's content store (two calls a blob, and again for
// the size: a dozen calls in all) the first time its target is seen, and
// from memory after that. Every pod start looks its image up (GetImage),
// and in a 30-pod burst those calls queued behind the other pods' creates
// in containerd: 400-750 ms a lookup at load 13-16 (issue 32; the
// image's record, by name, is still read each time). An image whose
// content is removed behind containerd's image records (ctr content rm)
// keeps the facts it had; one whose size could not be read is not kept.
func (r *Runtime) factsOf(ctx context.Context, img images.Image) (contentFacts, error) {
	key := img.Target.Digest.String()
	if f, ok := r.contentFacts.Load(key); ok {
		return f.(contentFacts), nil
	}
	cs, platform := r.client.ContentStore(), platforms.Default()
	conf, err := img.Config(ctx, cs, platform)
	if err != nil {
		return contentFacts{}, err
	}
	f := contentFacts{id: conf.Digest.String()}
	if f.size, err = img.Size(ctx, cs, platform); err != nil {
		r.opts.Logger.Debug("image size unknown", "image", img.Name, "err", err)
		return f, nil
	}
	r.contentFacts.Store(key, f)
	return f, nil
}

// forgetFacts drops the content facts of the image id (a removed image).
func (r *Runtime) forgetFacts(id string) {
	r.contentFacts.Range(func(k, v any) bool {
		if v.(contentFacts).id == id {
			r.contentFacts.Delete(k)
		}
		return true
	})
}

// PullImage pulls an image from its registry into containerd, anonymously
// (see PullImageWithAuth for the hosts tried and the progress timeout),
// and unpacks it for the configured snapshotter; ref may be short
// ("busybox:1.36") and is stored under its normalised form. Pulling an image that is already present
// only checks the registry for a newer manifest and fetches what is missing.
func (r *Runtime) PullImage(ctx context.Context, ref string) (Image, error) {
	return r.PullImageWithAuth(ctx, ref, nil)
}
