// Command csiprovisioner is a dynamic provisioner for a CSI driver, in the
// shape of kubernetes-csi's external-provisioner (whose Go module the
// module proxy here does not serve), built on the same library,
// sigs.k8s.io/sig-storage-lib-external-provisioner: for a claim of a
// StorageClass whose provisioner is the driver's name it calls the
// driver's CreateVolume (volume name: the PV's name, pvc-<claim UID>) and
// makes the PV with a csi source; when a PV of the driver with reclaim
// policy Delete is released it calls DeleteVolume and deletes the PV.
// As external-provisioner it puts its finalizer on the PVs it makes.
//
// It is test harness (e2e/csi_sts_test.go runs it next to the cluster; it
// reaches the driver through the driver's socket on the host), in a Go
// module of its own so that the library's dependencies do not move the
// agent's.
//
// With -resizer it is external-resizer's stand-in too (resizer.go): it
// expands the driver's volumes whose claims ask for more.
//
// Usage: csiprovisioner -kubeconfig FILE -driver NAME -endpoint SOCKET [-resizer]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// callTimeout bounds one CreateVolume or DeleteVolume
// (external-provisioner's --timeout default is 10s).
const callTimeout = 10 * time.Second

// Provisioner implements the library's controller.Provisioner with the
// CSI Controller service of one driver.
type Provisioner struct {
	Driver     string
	Controller csipb.ControllerClient
}

var _ controller.BlockProvisioner = (*Provisioner)(nil)

// SupportsBlock is true, as external-provisioner's: the CSI spec has no
// way to ask a driver whether it can make block volumes, so a claim of
// volumeMode Block goes to CreateVolume with a Block access type and a
// driver that cannot refuses it there. Without it the library refuses
// every Block claim itself ("does not support block volume provisioning").
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// Provision creates the volume and returns its PV (the library sets the
// claimRef, the StorageClass name, the provisioned-by annotation and the
// finalizer).
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	// A claim of volumeMode Block gets a block volume (a Block access
	// type, as external-provisioner asks), its PV the same volumeMode.
	mode := v1.PersistentVolumeFilesystem
	if o.PVC.Spec.VolumeMode != nil {
		mode = *o.PVC.Spec.VolumeMode
	}
	req := o.PVC.Spec.Resources.Requests[v1.ResourceStorage]
	caps := make([]*csipb.VolumeCapability, 0, len(o.PVC.Spec.AccessModes))
	for _, am := range o.PVC.Spec.AccessModes {
		c := &csipb.VolumeCapability{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(am)},
		}
		if mode == v1.PersistentVolumeBlock {
			c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
		}
		caps = append(caps, c)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := p.Controller.CreateVolume(cctx, &csipb.CreateVolumeRequest{
		Name: o.PVName, CapacityRange: &csipb.CapacityRange{RequiredBytes: req.Value()},
		VolumeCapabilities: caps, Parameters: o.StorageClass.Parameters,
	})
	if err != nil {
		// The driver may have made the volume: the library calls again
		// with the same name (CreateVolume is idempotent).
		return nil, controller.ProvisioningInBackground, fmt.Errorf("rpc error: CreateVolume: %w", err)
	}
	size := resp.Volume.CapacityBytes
	if size < req.Value() {
		size = req.Value()
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	mountOptions := o.StorageClass.MountOptions
	if mode == v1.PersistentVolumeBlock {
		mountOptions = nil // not for a block volume
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    &mode,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  mountOptions,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: p.Driver, VolumeHandle: resp.Volume.VolumeId, VolumeAttributes: resp.Volume.VolumeContext,
			}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete deletes the PV's volume; a PV of another driver is not this
// provisioner's.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.Driver {
		return &controller.IgnoredError{Reason: "not a volume of driver " + p.Driver}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := p.Controller.DeleteVolume(cctx, &csipb.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
		return fmt.Errorf("rpc error: DeleteVolume: %w", err)
	}
	return nil
}

func accessMode(am v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	switch am {
	case v1.ReadWriteOnce:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// Run provisions for driver, whose CSI socket is endpoint, until ctx is
// done: the library's controller without leader election (one provisioner
// per driver) and without its metrics server; with resize, the resizer
// beside it. The connection is made lazily, so the driver may come up
// later.
func Run(ctx context.Context, client kubernetes.Interface, driver, endpoint string, resize bool) error {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &Provisioner{Driver: driver, Controller: csipb.NewControllerClient(conn)}
	if resize {
		done := make(chan struct{})
		go func() { defer close(done); RunResizer(ctx, client, driver, p.Controller) }()
		defer func() { <-done }()
	}
	c := controller.NewProvisionController(ctx, client, driver, p,
		controller.LeaderElection(false), controller.MetricsPort(0), controller.AddFinalizer(true),
		controller.ResyncPeriod(15*time.Second), controller.ExponentialBackOffOnError(false),
	)
	c.Run(ctx)
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	driver := flag.String("driver", "", "the CSI driver's name (the StorageClass's provisioner)")
	endpoint := flag.String("endpoint", "", "the driver's CSI socket")
	resize := flag.Bool("resizer", false, "expand the driver's volumes too (external-resizer's part)")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Run(ctx, client, *driver, *endpoint, *resize); err != nil {
		log.Fatal(err)
	}
}
