package runtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	apitypes "github.com/containerd/containerd/api/types"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// fakeImageStore is containerd's image and content services over blobs
// in memory, counting the calls to the content store.
type fakeImageStore struct {
	mu           sync.Mutex
	blobs        map[digest.Digest][]byte
	images       map[string]ocispec.Descriptor // name → target
	contentCalls int
	imageCalls   int
}

func (f *fakeImageStore) addImage(t *testing.T, name, layer string) (id digest.Digest, size int64) {
	t.Helper()
	put := func(mediaType string, b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		f.blobs[d] = b
		return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
	}
	cfg := put(ocispec.MediaTypeImageConfig, []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["`+digest.FromString(layer).String()+`"]}}`))
	l := put(ocispec.MediaTypeImageLayer, []byte(layer))
	m, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{l}})
	if err != nil {
		t.Fatal(err)
	}
	md := put(ocispec.MediaTypeImageManifest, m)
	f.mu.Lock()
	f.images[name] = md
	f.mu.Unlock()
	return cfg.Digest, md.Size + cfg.Size + l.Size
}

func (f *fakeImageStore) image(name string) *imagesapi.Image {
	d := f.images[name]
	return &imagesapi.Image{Name: name, Target: &apitypes.Descriptor{MediaType: d.MediaType, Digest: d.Digest.String(), Size: d.Size}}
}

// fakeImages and fakeContent are the two services over one store.
type fakeImages struct {
	imagesapi.UnimplementedImagesServer
	*fakeImageStore
}

type fakeContent struct {
	contentapi.UnimplementedContentServer
	*fakeImageStore
}

func (f fakeImages) Get(_ context.Context, req *imagesapi.GetImageRequest) (*imagesapi.GetImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageCalls++
	if _, ok := f.images[req.Name]; !ok {
		return nil, status.Error(codes.NotFound, "image not found")
	}
	return &imagesapi.GetImageResponse{Image: f.image(req.Name)}, nil
}

// List answers every image (GetImage's filter by target digest matches
// the one image of each target here).
func (f fakeImages) List(context.Context, *imagesapi.ListImagesRequest) (*imagesapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageCalls++
	var out []*imagesapi.Image
	for name := range f.images {
		out = append(out, f.image(name))
	}
	return &imagesapi.ListImagesResponse{Images: out}, nil
}

func (f fakeContent) Info(_ context.Context, req *contentapi.InfoRequest) (*contentapi.InfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.contentCalls++
	b, ok := f.blobs[digest.Digest(req.Digest)]
	if !ok {
		return nil, status.Error(codes.NotFound, "content not found")
	}
	return &contentapi.InfoResponse{Info: &contentapi.Info{Digest: req.Digest, Size: int64(len(b))}}, nil
}

func (f fakeContent) Read(req *contentapi.ReadContentRequest, srv contentapi.Content_ReadServer) error {
	f.mu.Lock()
	f.contentCalls++
	b, ok := f.blobs[digest.Digest(req.Digest)]
	f.mu.Unlock()
	if !ok {
		return status.Error(codes.NotFound, "content not found")
	}
	b = b[min(int(req.Offset), len(b)):]
	if req.Size > 0 && int(req.Size) < len(b) {
		b = b[:req.Size]
	}
	return srv.Send(&contentapi.ReadContentResponse{Offset: req.Offset, Data: b})
}

func (f *fakeImageStore) calls() (content, images int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.contentCalls, f.imageCalls
}

// GetImage reads an image's index, manifest and config from containerd's
// content store the first time it sees its target, and only its record
// after that: every pod start looks its image up, and in a 30-pod burst
// those dozen content calls a lookup queued behind the other pods'
// creates in containerd (400-750 ms a lookup at load 13-16, issue 32).
// The record is still read every time, so a name that now points to
// another image is reported as that image; ListImages uses the same facts.
func TestGetImageReadsContentOncePerTarget(t *testing.T) {
	store := &fakeImageStore{blobs: map[digest.Digest][]byte{}, images: map[string]ocispec.Descriptor{}}
	client := fakeContainerdClient(t, func(srv *grpc.Server) {
		imagesapi.RegisterImagesServer(srv, fakeImages{fakeImageStore: store})
		contentapi.RegisterContentServer(srv, fakeContent{fakeImageStore: store})
	})
	r := &Runtime{opts: Options{Namespace: "test", Clock: clock.RealClock{}, CallTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}, client: client}
	ctx := context.Background()

	const name = "docker.io/library/app:1"
	id1, size1 := store.addImage(t, name, "layer one")
	get := func(wantID digest.Digest, wantSize int64) {
		t.Helper()
		img, err := r.GetImage(ctx, "app:1")
		if err != nil {
			t.Fatal(err)
		}
		if img.ID != wantID.String() || img.Size != wantSize || len(img.Names) != 1 || img.Names[0] != name {
			t.Fatalf("GetImage = %+v, want ID %s, size %d, names [%s]", img, wantID, wantSize, name)
		}
	}
	get(id1, size1)
	content, images := store.calls()
	if content == 0 {
		t.Fatal("the first lookup read no content: the fake is not what GetImage reads")
	}
	for range 3 {
		get(id1, size1)
	}
	if c, i := store.calls(); c != content || i == images {
		t.Errorf("three more lookups of the same image made %d content calls (want 0) and %d record calls (want some)", c-content, i-images)
	}

	// Retagged: the name now points to another image.
	id2, size2 := store.addImage(t, name, "layer two")
	get(id2, size2)
	if c, _ := store.calls(); c == content {
		t.Error("the new target's content was not read")
	}
	content, _ = store.calls()
	imgs, err := r.ListImages(ctx)
	if err != nil || len(imgs) != 1 || imgs[0].ID != id2.String() || imgs[0].Size != size2 {
		t.Errorf("ListImages = %+v, %v", imgs, err)
	}
	if c, _ := store.calls(); c != content {
		t.Errorf("ListImages made %d content calls for an image GetImage had read", c-content)
	}
}
