package csihostpath

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"slices"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The attach-enabled driver: the capability, the publish context the
// node side requires, and no detach while staged.
func TestAttach(t *testing.T) {
	ctx := context.Background()
	d := &Driver{Name: "t.csi", NodeID: "n1", DataDir: t.TempDir(), EnableAttach: true}
	mount := &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}}}
	if _, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csipb.VolumeCapability{mount}}); err != nil {
		t.Fatal(err)
	}
	caps, err := d.ControllerGetCapabilities(ctx, nil)
	if err != nil || !slices.ContainsFunc(caps.Capabilities, func(c *csipb.ControllerServiceCapability) bool {
		return c.GetRpc().GetType() == csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME
	}) {
		t.Errorf("capabilities %v (%v), want PUBLISH_UNPUBLISH_VOLUME", caps, err)
	}
	code := func(err error) codes.Code { return status.Code(err) }

	if _, err := d.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: "missing", NodeId: "n1", VolumeCapability: mount}); code(err) != codes.NotFound {
		t.Errorf("publishing a volume that is not there: %v, want NotFound", err)
	}
	stage := func(pc map[string]string) error {
		return d.checkAttached("v", pc)
	}
	if err := stage(nil); code(err) != codes.InvalidArgument {
		t.Errorf("staging without a publish context: %v, want InvalidArgument", err)
	}
	if err := stage(map[string]string{AttachmentKey: "x"}); code(err) != codes.FailedPrecondition {
		t.Errorf("staging a volume not attached: %v, want FailedPrecondition", err)
	}
	r, err := d.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1", VolumeCapability: mount})
	if err != nil || r.PublishContext[AttachmentKey] == "" {
		t.Fatalf("publish: %v %v", r, err)
	}
	again, err := d.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1", VolumeCapability: mount})
	if err != nil || again.PublishContext[AttachmentKey] != r.PublishContext[AttachmentKey] {
		t.Errorf("publish again: %v %v, want the same attachment %v", again, err, r.PublishContext)
	}
	if err := stage(map[string]string{AttachmentKey: "x"}); code(err) != codes.FailedPrecondition {
		t.Errorf("staging with another attachment's ID: %v, want FailedPrecondition", err)
	}
	if err := stage(r.PublishContext); err != nil {
		t.Errorf("staging the attached volume: %v", err)
	}
	// Attached to n1, not to n2.
	other := &Driver{Name: "t.csi", NodeID: "n2", DataDir: d.DataDir, EnableAttach: true}
	if err := other.checkAttached("v", r.PublishContext); code(err) != codes.FailedPrecondition {
		t.Errorf("staging on another node: %v, want FailedPrecondition", err)
	}

	if err := d.markStaged("v", true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ControllerUnpublishVolume(ctx, &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: "n1"}); code(err) != codes.FailedPrecondition {
		t.Errorf("detaching a staged volume: %v, want FailedPrecondition", err)
	}
	if err := d.markStaged("v", false); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if _, err := d.ControllerUnpublishVolume(ctx, &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: "n1"}); err != nil {
			t.Errorf("detach: %v", err)
		}
	}
	if _, err := os.Stat(d.attachmentRecord("v", "n1")); !os.IsNotExist(err) {
		t.Errorf("the attachment record stays after the detach: %v", err)
	}
	if err := stage(r.PublishContext); code(err) != codes.FailedPrecondition {
		t.Errorf("staging after the detach: %v, want FailedPrecondition", err)
	}

	// Without -enable-attach: no capability, no attach, no check.
	plain := &Driver{Name: "t.csi", NodeID: "n1", DataDir: d.DataDir}
	if _, err := plain.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1", VolumeCapability: mount}); code(err) != codes.Unimplemented {
		t.Errorf("publish without -enable-attach: %v, want Unimplemented", err)
	}
	if err := plain.checkAttached("v", nil); err != nil {
		t.Errorf("node check without -enable-attach: %v", err)
	}
	caps, _ = plain.ControllerGetCapabilities(ctx, nil)
	if slices.ContainsFunc(caps.Capabilities, func(c *csipb.ControllerServiceCapability) bool {
		return c.GetRpc().GetType() == csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME
	}) {
		t.Errorf("PUBLISH_UNPUBLISH_VOLUME without -enable-attach")
	}
}

// With NodeVolumesInUse (-check-in-use) the node side logs, per call,
// whether the Node listed the volume by its unique name.
func TestCheckInUse(t *testing.T) {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	var inUse []string
	var readErr error
	d := &Driver{Name: "t.csi", NodeVolumesInUse: func() ([]string, error) { return inUse, readErr }}
	d.checkInUse("NodeStageVolume", "v")
	inUse = []string{"kubernetes.io/csi/t.csi^v"}
	d.checkInUse("NodePublishVolume", "v")
	readErr = errors.New("forbidden")
	d.checkInUse("NodeStageVolume", "w")
	out := buf.String()
	for _, want := range []string{
		"NodeStageVolume of v: NOT in the Node's volumesInUse []",
		"NodePublishVolume of v: in the Node's volumesInUse",
		"NodeStageVolume of w: cannot read the Node's volumesInUse: forbidden",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q:\n%s", want, out)
		}
	}
	buf.Reset()
	(&Driver{Name: "t.csi"}).checkInUse("NodeStageVolume", "v")
	if buf.Len() != 0 {
		t.Errorf("logged without NodeVolumesInUse: %s", buf.String())
	}
}
