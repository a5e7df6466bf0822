package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// Kubelet's names and paths (pkg/volume/csi).
const (
	pluginName      = "kubernetes.io/csi"
	podPluginDir    = "kubernetes.io~csi" // under <podDir>/volumes
	volDataFileName = "vol_data.json"
	globalMount     = "globalmount"
	podMountDir     = "mount"
)

// The volume context keys kubelet adds for drivers with podInfoOnMount.
const (
	ctxPodName        = "csi.storage.k8s.io/pod.name"
	ctxPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	ctxPodUID         = "csi.storage.k8s.io/pod.uid"
	ctxServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	ctxEphemeral      = "csi.storage.k8s.io/ephemeral"
)

// Getter reads one object by name (client-go's typed clients and
// internal/kubeclient's satisfy it).
type Getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// API is what the Mounter reads from the API server.
type API struct {
	PVCs              func(namespace string) Getter[*v1.PersistentVolumeClaim]
	PVs               Getter[*v1.PersistentVolume]
	CSIDrivers        Getter[*storagev1.CSIDriver]
	VolumeAttachments Getter[*storagev1.VolumeAttachment]
	Secrets           func(namespace string) Getter[*v1.Secret]
	// PVCStatus writes the node's part of volume expansion to a claim's
	// status; nil: volumes are not expanded on the node.
	PVCStatus func(namespace string) PVCPatcher
}

// Drivers finds registered drivers (*Registry implements it).
type Drivers interface {
	Driver(name string) (*Driver, bool)
}

// Mounter sets up and tears down the CSI and persistentVolumeClaim volumes
// of pods; it implements volume.External.
type Mounter struct {
	RootDir  string
	NodeName string
	API      API
	Drivers  Drivers
	// Clock times volume stats (PodVolumeStats) and bounds the wait for
	// a volume to be reported in use; nil: the real clock.
	Clock clock.Clock
	// InUseChanged is called (without the Mounter's locks held) when the
	// set of attachable volumes in VolumesInUse changes, so that the node
	// status is computed and written at once rather than at its next
	// period: the mount of an attachable volume waits for that write
	// (MarkVolumesReportedInUse). nil: nothing is told; the wait then
	// ends at the next status write, or after inUseWait.
	InUseChanged func()
	// Log gets what fails without failing a pod's sync (the online
	// expansion of a mounted volume); nil: discarded.
	Log *slog.Logger
	// Recorder sends the volume expansion's Events (kubelet's
	// FileSystemResizeSuccessful, VolumeResizeFailed) and, with
	// VolumeHealth, VolumeConditionAbnormal; nil: none.
	Recorder record.EventRecorder
	// VolumeHealth is kubelet's CSIVolumeHealth feature gate: the volume
	// condition of a driver with VOLUME_CONDITION is in the volume stats
	// (volumeHealthStats, kubelet_volume_stats_health_status_abnormal)
	// and an abnormal one is a VolumeConditionAbnormal Event on the pod
	// (stats.go).
	VolumeHealth bool
	// StatsPeriod is kubelet's volumeStatsAggPeriod: how long a volume's
	// measured stats are reused, and RunVolumeHealth's period; 0:
	// DefaultStatsPeriod; negative: no volume stats and no health loop.
	StatsPeriod time.Duration
	// Tokens gives the service account tokens of CSIDriver tokenRequests
	// (*volume.Tokens, shared with projected volumes); nil: a driver with
	// tokenRequests fails to publish.
	Tokens TokenSource

	locks sync.Map  // volume key -> *sync.Mutex
	block blockHost // nil: the host's (block.go)

	mu     sync.Mutex
	inUse  map[v1.UniqueVolumeName]map[string]bool // attachable volume -> pod dirs
	synced bool                                    // Reconstruct has run
	// The volumes the Node's status.volumesInUse held at the last
	// successful status write (or the last status computation that needed
	// no write): kubelet's desired state of world reportedInUse.
	reported map[v1.UniqueVolumeName]bool
	// reportedCh is closed (and cleared) by MarkVolumesReportedInUse:
	// what waitReportedInUse waits on; nil while nobody waits.
	reportedCh chan struct{}
	setUp      map[string]map[string]*setUpVolume // pod UID -> volume name -> what it is (stats.go)
}

var _ volume.External = (*Mounter)(nil)

// Handles reports whether the Mounter sets up v.
func Handles(v *v1.Volume) bool {
	return v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.CSI != nil || IsMigratedInline(v)
}

// csiVolume is what a pod's volume resolves to.
type csiVolume struct {
	block          bool // volumeMode Block: mapped (block.go), not mounted
	driver, handle string
	specName       string // the PV's name, or the pod's volume name for an inline volume
	readOnly       bool
	fsType         string
	attrs          map[string]string
	mountOptions   []string
	accessModes    []v1.PersistentVolumeAccessMode
	stageSecret    *v1.SecretReference
	publishSecret  *v1.SecretReference
	expandSecret   *v1.SecretReference
	ephemeral      bool
	// A persistent volume's claim and the PV's capacity (expand.go).
	pvc    *v1.PersistentVolumeClaim
	pvSize resource.Quantity
}

// opError is a failure of the kubelet operation op (the prefix of the
// FailedMount message: MountVolume.WaitForAttach, MountVolume.MountDevice).
type opError struct {
	op     string
	prefix string // kubelet's wording when not "<op> failed"
	err    error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// SetUp makes the pod's volume v ready and returns its host path: a
// persistentVolumeClaim (or generic ephemeral volume: its claim) whose PV is hostPath is that path; one whose PV is
// local is bound at <podDir>/volumes/kubernetes.io~local-volume/<PV name>
// (setUpLocal); one whose PV is CSI, and an inline csi volume, are
// published by the driver at
// <podDir>/volumes/kubernetes.io~csi/<PV or volume name>/mount. An error is
// a *volume.MountError with kubelet's FailedMount message.
func (m *Mounter) SetUp(ctx context.Context, pod *v1.Pod, podDir string, v *v1.Volume) (string, error) {
	cv, direct, err := m.resolve(ctx, pod, v)
	if err != nil {
		return "", mountError(v.Name, "MountVolume.SetUp", err)
	}
	sv := &setUpVolume{name: v.Name, namespace: pod.Namespace, podName: pod.Name, podUID: pod.UID, claim: claimName(pod, v)}
	switch {
	case direct != nil && direct.pv.Spec.HostPath != nil:
		p, err := volume.SetupHostPath(direct.pv.Spec.HostPath)
		if err != nil {
			return "", mountError(v.Name, "MountVolume.SetUp", err)
		}
		return p, nil
	case direct != nil && direct.block:
		p, err := m.mapLocal(pod, podDir, direct)
		if err != nil {
			return "", mountError(direct.pv.Name, "MapVolume.MapBlockVolume", err)
		}
		sv.localDevice = filepath.Join(m.localBlockPaths(direct.pv.Name).globalMap, string(pod.UID))
		m.noteSetUp(string(pod.UID), sv)
		return p, nil
	case direct != nil:
		p, err := setUpLocal(pod, podDir, direct)
		if err != nil {
			return "", mountError(direct.pv.Name, "MountVolume.SetUp", err)
		}
		sv.localDir = p
		m.noteSetUp(string(pod.UID), sv)
		return p, nil
	}
	name := cv.specName
	if cv.specName == "" {
		name = v.Name
	}
	if cv.block {
		// Raw block: the pod's symlink to the device; its stats are the
		// driver's for the pod's bind of the device.
		p, err := m.mapCSI(ctx, pod, podDir, cv)
		if err != nil {
			return "", mountError(name, "MapVolume.MapPodDevice", err)
		}
		sv.driver, sv.handle = cv.driver, cv.handle
		sv.target = filepath.Join(m.csiBlockPaths(cv.specName).globalMap, string(pod.UID))
		m.noteSetUp(string(pod.UID), sv)
		return p, nil
	}
	p, err := m.setUpCSI(ctx, pod, podDir, cv)
	if err != nil {
		return "", mountError(name, "MountVolume.SetUp", err)
	}
	sv.driver, sv.handle, sv.target = cv.driver, cv.handle, p
	m.noteSetUp(string(pod.UID), sv)
	return p, nil
}

// claimName is the claim a pod volume names: its persistentVolumeClaim's,
// or a generic ephemeral volume's <pod>-<volume>; "" for others.
func claimName(pod *v1.Pod, v *v1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v)
	}
	return ""
}

func mountError(vol, op string, err error) error {
	var oe *opError
	prefix := ""
	if errors.As(err, &oe) {
		op, prefix = oe.op, oe.prefix
	}
	me := &volume.MountError{Volume: vol, Op: op, Err: err, Prefix: prefix}
	if strings.HasPrefix(op, "MapVolume.") {
		me.Reason = reasonFailedMap // kubelet's map operations' event
	}
	return me
}

// directPV is a hostPath or local PV: set up without a driver.
type directPV struct {
	pv       *v1.PersistentVolume
	readOnly bool
	block    bool // a local PV of volumeMode Block
}

// resolve turns a pod volume into the CSI volume it names, or a hostPath
// or local PV. Its errors are kubelet's (desired state of world
// populator, csi plugin).
func (m *Mounter) resolve(ctx context.Context, pod *v1.Pod, v *v1.Volume) (*csiVolume, *directPV, error) {
	if src := v.CSI; src != nil {
		if _, device := podVolumeUse(pod, v.Name); device {
			return nil, nil, fmt.Errorf("volume %s is a csi volume: only persistentVolumeClaim and ephemeral volumes can be volumeDevices", v.Name)
		}
		cv := &csiVolume{
			driver: src.Driver, handle: makeVolumeHandle(string(pod.UID), v.Name), specName: v.Name,
			readOnly: src.ReadOnly != nil && *src.ReadOnly, attrs: src.VolumeAttributes, ephemeral: true,
			accessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		}
		if src.FSType != nil {
			cv.fsType = *src.FSType
		}
		if r := src.NodePublishSecretRef; r != nil {
			cv.publishSecret = &v1.SecretReference{Name: r.Name, Namespace: pod.Namespace}
		}
		return cv, nil, nil
	}
	if IsMigratedInline(v) {
		// An inline in-tree volume of a migrated plugin: translated to the
		// driver's CSI PV (named by the translation), a persistent volume
		// of the driver (kubelet's InlineVolumeSpecForCSIMigration; the
		// attach/detach controller attaches it with the VolumeAttachment's
		// inlineVolumeSpec).
		if _, device := podVolumeUse(pod, v.Name); device {
			return nil, nil, fmt.Errorf("volume %s is an inline volume: only persistentVolumeClaim and ephemeral volumes can be volumeDevices", v.Name)
		}
		pv, err := translateInline(v, pod.Namespace)
		if err != nil {
			return nil, nil, err
		}
		return csiVolumeOf(pv, nil, false, false), nil, nil
	}
	src := v.PersistentVolumeClaim
	if v.Ephemeral != nil {
		// A generic ephemeral volume is the claim <pod>-<volume> that the
		// ephemeral volume controller makes, owned by the pod.
		src = &v1.PersistentVolumeClaimVolumeSource{ClaimName: ephemeral.VolumeClaimName(pod, v)}
	}
	if src == nil {
		return nil, nil, fmt.Errorf("volume %q is not a persistentVolumeClaim, ephemeral or csi volume", v.Name)
	}
	if m.API.PVCs == nil {
		return nil, nil, errors.New("persistentVolumeClaim volumes need the API server")
	}
	pvc, err := m.API.PVCs(pod.Namespace).Get(ctx, src.ClaimName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PVC from API server: %v", pod.Namespace, src.ClaimName, err)
	}
	if v.Ephemeral != nil {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, nil, fmt.Errorf("error processing PVC %s/%s: %v", pod.Namespace, src.ClaimName, err)
		}
	}
	if pvc.DeletionTimestamp != nil {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: can't start pod because PVC %s/%s is being deleted", pod.Namespace, src.ClaimName, pod.Namespace, src.ClaimName)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)",
			pod.Namespace, src.ClaimName, pod.Namespace, src.ClaimName, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	pv, err := m.API.PVs.Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: %v", pod.Namespace, src.ClaimName, pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: the PV's claimRef does not point to the PVC (UID %s)", pod.Namespace, src.ClaimName, pv.Name, pvc.UID)
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
	if err := checkVolumeMode(pod, v.Name, block); err != nil {
		return nil, nil, fmt.Errorf("error processing PVC %s/%s: %v", pod.Namespace, src.ClaimName, err)
	}
	if pv.Spec.HostPath != nil && block {
		return nil, nil, fmt.Errorf("PV %s: a hostPath persistent volume cannot be of volumeMode Block (kubelet's hostPath plugin maps no devices)", pv.Name)
	}
	if pv.Spec.HostPath != nil || pv.Spec.Local != nil {
		return nil, &directPV{pv: pv, readOnly: src.ReadOnly, block: block}, nil
	}
	if migratedPlugin(pv, nil) != "" {
		// CSI migration (kubelet's desired state of world populator): the
		// PV's in-tree source becomes its driver's CSI source; the PV's
		// name stays, and so do its paths.
		if pv, err = translatePV(pv); err != nil {
			return nil, nil, err
		}
	}
	if pv.Spec.CSI == nil {
		return nil, nil, fmt.Errorf("PV %s: only csi, hostPath, local and CSI-migrated in-tree (%s) persistent volumes are supported", pv.Name, strings.Join(MigratedPlugins, ", "))
	}
	return csiVolumeOf(pv, pvc, src.ReadOnly, block), nil, nil
}

// csiVolumeOf is the CSI volume of a PV with a csi source (a claim's, or
// the translation of an inline in-tree volume without a claim).
func csiVolumeOf(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim, readOnly, block bool) *csiVolume {
	c := pv.Spec.CSI
	return &csiVolume{
		block:  block,
		driver: c.Driver, handle: c.VolumeHandle, specName: pv.Name,
		readOnly: readOnly || c.ReadOnly, fsType: c.FSType, attrs: c.VolumeAttributes,
		mountOptions: pv.Spec.MountOptions, accessModes: pv.Spec.AccessModes,
		stageSecret: c.NodeStageSecretRef, publishSecret: c.NodePublishSecretRef, expandSecret: c.NodeExpandSecretRef,
		pvc: pvc, pvSize: pv.Spec.Capacity[v1.ResourceStorage],
	}
}

// setUpLocal is kubelet's local volume plugin (pkg/volume/local SetUpAt)
// for a filesystem: the PV's path bind-mounted at
// <podDir>/volumes/kubernetes.io~local-volume/<PV name> (read-only for a
// read-only claim), then, unless read-only, the pod's fsGroup on it. A
// mount already there is used as it is; the pod's teardown unmounts it
// with the pod's other volume mounts.
func setUpLocal(pod *v1.Pod, podDir string, d *directPV) (string, error) {
	src := d.pv.Spec.Local.Path
	fi, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("path %q does not exist", src)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("local volume %s: %s is not a directory (block local volumes are not supported)", d.pv.Name, src)
	}
	dir := filepath.Join(podDir, "volumes", "kubernetes.io~local-volume", d.pv.Name)
	if mounted, _ := isMountPoint(dir); mounted {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("mount failed: bind %s on %s: %w", src, dir, err)
	}
	if d.readOnly {
		if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(dir, 0)
			return "", fmt.Errorf("mount failed: remount %s read-only: %w", dir, err)
		}
	} else if g := fsGroup(pod); g != nil && !skipOwnership(dir, *g, pod) {
		volume.SetOwnership(dir, *g)
	}
	return dir, nil
}

// volData is kubelet's vol_data.json.
type volData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

func (m *Mounter) stagingDir(driver, handle string) string {
	return filepath.Join(m.RootDir, "plugins", pluginName, driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))))
}

func podVolumeDir(podDir, specName string) string {
	return filepath.Join(podDir, "volumes", podPluginDir, specName)
}

// uniqueName is kubelet's unique volume name of a CSI volume.
func uniqueName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName(pluginName + "/" + driver + "^" + handle)
}

func (m *Mounter) lock(driver, handle string) func() {
	l, _ := m.locks.LoadOrStore(driver+"^"+handle, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func (m *Mounter) setUpCSI(ctx context.Context, pod *v1.Pod, podDir string, cv *csiVolume) (string, error) {
	dir := podVolumeDir(podDir, cv.specName)
	target := filepath.Join(dir, podMountDir)
	// Published already (a resync, or an agent restart while the pod
	// runs): kubelet's SetUpAt skips a mounted target too.
	mounted, _ := isMountPoint(target)
	drv, err := m.getCSIDriver(ctx, cv.driver)
	if mounted {
		// Still in use; listed in volumesInUse when attachable (after an
		// agent restart this is how the list is rebuilt).
		if err == nil {
			attach := !cv.ephemeral && attachRequired(drv)
			m.noteInUse(cv, podDir, attach)
		}
		// Online expansion: a failure is logged and retried at the next
		// sync; the pod keeps its volume (kubelet's in-use expansion).
		if err := m.expandMounted(ctx, pod, cv, target); err != nil {
			m.log().Warn("volume expansion failed", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "volume", cv.specName, "err", err)
			m.event(pod, v1.EventTypeWarning, "VolumeResizeFailed", err.Error())
		}
		// requiresRepublish: NodePublishVolume again at every sync
		// (kubelet's remount of a volume whose plugin RequiresRemount,
		// marked at each pod sync). A failure is kubelet's FailedMount
		// Event; the pod keeps its volume and the next sync tries again.
		if err == nil && requiresRepublish(drv) {
			if err := m.publish(ctx, pod, podDir, cv, drv, true); err != nil {
				me := &volume.MountError{Volume: cv.specName, Op: "MountVolume.SetUp", Err: err}
				m.log().Warn("volume republish failed", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "volume", cv.specName, "err", err)
				m.event(pod, v1.EventTypeWarning, me.EventReason(), me.Error())
			}
		}
		return target, nil
	}
	if err != nil {
		return "", err
	}
	if cv.ephemeral && !slices.Contains(lifecycleModes(drv), storagev1.VolumeLifecycleEphemeral) {
		return "", fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", storagev1.VolumeLifecycleEphemeral, cv.driver, lifecycleModes(drv))
	}
	if !cv.ephemeral && !slices.Contains(lifecycleModes(drv), storagev1.VolumeLifecyclePersistent) {
		return "", fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", storagev1.VolumeLifecyclePersistent, cv.driver, lifecycleModes(drv))
	}
	// kubelet's MountVolume enforces the ReadWriteOncePod access mode on
	// the node too (the scheduler does, but a pod may be bound by name).
	if len(cv.accessModes) == 1 && cv.accessModes[0] == v1.ReadWriteOncePod && m.usedElsewhere(cv, podDir) {
		return "", errors.New("volume uses the ReadWriteOncePod access mode and is already in use by another pod")
	}
	if err := m.publish(ctx, pod, podDir, cv, drv, false); err != nil {
		return "", err
	}
	return target, nil
}

// publish is kubelet's csiMountMgr.SetUpAt: the wait for the attachment,
// NodeStageVolume once per volume, NodePublishVolume with the volume
// context (attributes, pod info, service account tokens) and the fsGroup.
// republish: the volume is published already (requiresRepublish), so it
// is neither staged nor expanded, and nothing is removed if the call
// fails.
func (m *Mounter) publish(ctx context.Context, pod *v1.Pod, podDir string, cv *csiVolume, drv *storagev1.CSIDriver, republish bool) error {
	dir := podVolumeDir(podDir, cv.specName)
	target := filepath.Join(dir, podMountDir)
	attach := !cv.ephemeral && attachRequired(drv)
	m.noteInUse(cv, podDir, attach)
	// A republish is of a mounted volume: no wait (kubelet's remount
	// does not verify the attachment again either).
	if attach && !republish {
		if err := m.waitReportedInUse(ctx, cv); err != nil {
			return err
		}
	}
	d, ok := m.Drivers.Driver(cv.driver)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name %s not found in the list of registered CSI drivers", cv.driver)
	}
	defer m.lock(cv.driver, cv.handle)()

	var publishContext map[string]string
	var err error
	if attach {
		if publishContext, err = m.attachment(ctx, cv); err != nil {
			return &opError{op: "MountVolume.WaitForAttach", err: err}
		}
	}
	caps, err := nodeCapabilities(ctx, d)
	if err != nil {
		return err
	}
	capability, err := volumeCapability(cv, caps, pod)
	if err != nil {
		return err
	}
	var staging string
	switch {
	case !caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] || cv.ephemeral:
	case republish:
		staging = filepath.Join(m.stagingDir(cv.driver, cv.handle), globalMount)
	default:
		staging, err = m.stage(ctx, d, cv, publishContext, capability)
		if err != nil {
			return &opError{op: "MountVolume.MountDevice", err: err}
		}
	}
	// The secrets, then the volume context: attributes, pod information,
	// service account tokens (kubelet's order; a later key wins).
	secrets, err := m.secrets(ctx, cv.publishSecret)
	if err != nil {
		return err
	}
	attrs := volumeContext(cv, drv, pod)
	tokens, err := m.serviceAccountTokenAttrs(ctx, pod, drv)
	if err != nil {
		return err
	}
	maps.Copy(attrs, tokens)
	if !republish {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to create dir %q:  %v", dir, err)
		}
		mode := storagev1.VolumeLifecyclePersistent
		if cv.ephemeral {
			mode = storagev1.VolumeLifecycleEphemeral
		}
		if err := writeVolData(dir, volData{
			SpecVolID: cv.specName, VolumeHandle: cv.handle, DriverName: cv.driver, NodeName: m.NodeName,
			AttachmentID: attachmentName(cv.handle, cv.driver, m.NodeName), VolumeLifecycleMode: string(mode),
		}); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodePublishVolume(pctx, &csipb.NodePublishVolumeRequest{
		VolumeId: cv.handle, PublishContext: publishContext, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, Readonly: cv.readOnly, Secrets: secrets, VolumeContext: attrs,
	}); err != nil {
		m.cleanUpFailedPublish(cv, dir, target, staging)
		return rpcError(err)
	}
	// A volume expanded while no pod had it (offline expansion): grown
	// now, and the mount fails if that fails, as kubelet's MountVolume.
	if !republish {
		if err := m.expandIfNeeded(ctx, pod, d, cv, caps, target, staging); err != nil {
			return err
		}
	}
	if g := fsGroup(pod); g != nil && capability.GetMount().GetVolumeMountGroup() == "" && supportsFSGroup(cv, drv) {
		if !skipOwnership(target, *g, pod) {
			volume.SetOwnership(target, *g)
		}
	}
	return nil
}

// cleanUpFailedPublish is kubelet's removal of what it made for a publish
// that failed for good; a target left mounted (a publish in progress, or
// a republished volume) is kept, to be retried or torn down.
func (m *Mounter) cleanUpFailedPublish(cv *csiVolume, dir, target, staging string) {
	if mounted, _ := isMountPoint(target); mounted {
		return
	}
	_ = os.Remove(target)
	if cv.ephemeral || staging == "" {
		_ = os.RemoveAll(dir)
	}
}

// expandMounted runs expandIfNeeded for a published volume (target: its
// publish target; a block volume's: the device's path, kubelet's
// DevicePath) when its claim asks for it (no driver call otherwise).
func (m *Mounter) expandMounted(ctx context.Context, pod *v1.Pod, cv *csiVolume, target string) error {
	if cv.pvc == nil {
		return nil
	}
	if c := cv.pvc.Status.Capacity[v1.ResourceStorage]; c.Cmp(cv.pvSize) >= 0 {
		return nil
	}
	d, ok := m.Drivers.Driver(cv.driver)
	if !ok {
		return fmt.Errorf("driver name %s not found in the list of registered CSI drivers", cv.driver)
	}
	defer m.lock(cv.driver, cv.handle)()
	caps, err := nodeCapabilities(ctx, d)
	if err != nil {
		return err
	}
	staging := ""
	switch {
	case !caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME]:
	case cv.block:
		staging = m.csiBlockPaths(cv.specName).staging
	default:
		staging = filepath.Join(m.stagingDir(cv.driver, cv.handle), globalMount)
	}
	return m.expandIfNeeded(ctx, pod, d, cv, caps, target, staging)
}

func (m *Mounter) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.New(slog.DiscardHandler)
}

func fsGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// skipOwnership is fsGroupChangePolicy OnRootMismatch: the volume's root
// has the group, the setgid bit and group rwx already.
func skipOwnership(target string, gid int64, pod *v1.Pod) bool {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroupChangePolicy == nil || *sc.FSGroupChangePolicy != v1.FSGroupChangeOnRootMismatch {
		return false
	}
	fi, err := os.Stat(target)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int64(st.Gid) == gid && fi.Mode()&fs.ModeSetgid != 0 && fi.Mode().Perm()&0o070 == 0o070
}

// supportsFSGroup is kubelet's (csiMountMgr.supportsFSGroup): never for a
// read-only volume or the None policy; always for File; for the default
// ReadWriteOnceWithFSType only with an fsType and, for a PV, a
// ReadWriteOnce access mode (inline volumes are ReadWriteOnce).
func supportsFSGroup(cv *csiVolume, drv *storagev1.CSIDriver) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil {
		policy = *drv.Spec.FSGroupPolicy
	}
	switch {
	case cv.readOnly || policy == storagev1.NoneFSGroupPolicy:
		return false
	case policy == storagev1.FileFSGroupPolicy:
		return true
	case cv.fsType == "":
		return false
	}
	return slices.Contains(cv.accessModes, v1.ReadWriteOnce)
}

// getCSIDriver reads the driver's CSIDriver object; nil when there is none
// (kubelet's defaults then: attach required, no pod info, the
// ReadWriteOnceWithFSType fsGroup policy, persistent volumes only).
func (m *Mounter) getCSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if m.API.CSIDrivers == nil {
		return nil, nil
	}
	d, err := m.API.CSIDrivers.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

func lifecycleModes(d *storagev1.CSIDriver) []storagev1.VolumeLifecycleMode {
	if d == nil || len(d.Spec.VolumeLifecycleModes) == 0 {
		return []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	return d.Spec.VolumeLifecycleModes
}

func attachRequired(d *storagev1.CSIDriver) bool {
	return d == nil || d.Spec.AttachRequired == nil || *d.Spec.AttachRequired
}

// attachmentName is kubelet's VolumeAttachment name.
func attachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// makeVolumeHandle is kubelet's handle of an inline volume.
func makeVolumeHandle(podUID, volName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volName)))
}

// attachment returns the publish context of the volume's VolumeAttachment
// once the attacher says it is attached; until then an error (the pod's
// sync retries with back-off, as kubelet 1.34's WaitForAttach, which reads
// the VolumeAttachment once and leaves the retries to its caller), with
// kubelet's messages: a VolumeAttachment not made yet (the attach/detach
// controller makes it) is a GET error.
func (m *Mounter) attachment(ctx context.Context, cv *csiVolume) (map[string]string, error) {
	name := attachmentName(cv.handle, cv.driver, m.NodeName)
	va, err := m.API.VolumeAttachments.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("volume %v has GET error for volume attachment %v: %v", cv.handle, name, err)
	}
	if va.DeletionTimestamp != nil {
		return nil, fmt.Errorf("volume attachment is being deleted")
	}
	if !va.Status.Attached {
		if e := va.Status.AttachError; e != nil {
			return nil, errors.New(e.Message)
		}
		return nil, fmt.Errorf("volume %v is not attached for volume attachment %v", cv.handle, name)
	}
	return va.Status.AttachmentMetadata, nil
}

func nodeCapabilities(ctx context.Context, d *Driver) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	cctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	resp, err := d.Node.NodeGetCapabilities(cctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("NodeGetCapabilities: %w", rpcError(err))
	}
	out := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		if r := c.GetRpc(); r != nil {
			out[r.GetType()] = true
		}
	}
	return out, nil
}

// volumeCapability is kubelet's: a mount volume with the fsType, the PV's
// mount options and, when the driver can apply it, the fsGroup as
// volume_mount_group; the access mode from the PV's (ReadWriteOnce is
// SINGLE_NODE_MULTI_WRITER when the driver knows it).
func volumeCapability(cv *csiVolume, caps map[csipb.NodeServiceCapability_RPC_Type]bool, pod *v1.Pod) (*csipb.VolumeCapability, error) {
	mode := csipb.VolumeCapability_AccessMode_UNKNOWN
	if len(cv.accessModes) > 0 {
		switch am := cv.accessModes[0]; am {
		case v1.ReadWriteOnce:
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
			if caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER] {
				mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
			}
		case v1.ReadOnlyMany:
			mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case v1.ReadWriteMany:
			mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		case v1.ReadWriteOncePod:
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
			if !caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER] {
				mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
			}
		default:
			return nil, fmt.Errorf("unknown access mode %q", am)
		}
	}
	mount := &csipb.VolumeCapability_MountVolume{FsType: cv.fsType, MountFlags: cv.mountOptions}
	if g := fsGroup(pod); g != nil && caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		mount.VolumeMountGroup = fmt.Sprint(*g)
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: mount},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}, nil
}

// volumeContext is the volume's attributes plus, for a driver with
// podInfoOnMount, kubelet's pod information.
func volumeContext(cv *csiVolume, drv *storagev1.CSIDriver, pod *v1.Pod) map[string]string {
	out := make(map[string]string, len(cv.attrs)+5)
	for k, v := range cv.attrs {
		out[k] = v
	}
	if drv != nil && drv.Spec.PodInfoOnMount != nil && *drv.Spec.PodInfoOnMount {
		out[ctxPodName] = pod.Name
		out[ctxPodNamespace] = pod.Namespace
		out[ctxPodUID] = string(pod.UID)
		out[ctxServiceAccount] = pod.Spec.ServiceAccountName
		out[ctxEphemeral] = fmt.Sprint(cv.ephemeral)
	}
	return out
}

func (m *Mounter) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if m.API.Secrets == nil {
		return nil, errors.New("secrets need the API server")
	}
	s, err := m.API.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("fetching NodePublishSecretRef %s/%s failed: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// stage is kubelet's MountDevice: NodeStageVolume once per volume at
// <rootDir>/plugins/kubernetes.io/csi/<driver>/<sha256 of handle>/globalmount,
// with vol_data.json beside it. A staging path already mounted is left
// as it is (drivers' NodeStageVolume is idempotent anyway).
func (m *Mounter) stage(ctx context.Context, d *Driver, cv *csiVolume, publishContext map[string]string, capability *csipb.VolumeCapability) (string, error) {
	dir := m.stagingDir(cv.driver, cv.handle)
	staging := filepath.Join(dir, globalMount)
	if mounted, _ := isMountPoint(staging); mounted {
		return staging, nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return "", fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed to create dir %q:  %v", staging, err)
	}
	if err := writeVolData(dir, volData{VolumeHandle: cv.handle, DriverName: cv.driver}); err != nil {
		return "", err
	}
	secrets, err := m.secrets(ctx, cv.stageSecret)
	if err != nil {
		return "", err
	}
	sctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodeStageVolume(sctx, &csipb.NodeStageVolumeRequest{
		VolumeId: cv.handle, PublishContext: publishContext, StagingTargetPath: staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: cv.attrs,
	}); err != nil {
		return "", rpcError(err)
	}
	return staging, nil
}

func writeVolData(dir string, d volData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, volDataFileName), b, 0o640); err != nil {
		return fmt.Errorf("kubernetes.io/csi: failed to save volume info data: %v", err)
	}
	return nil
}

func readVolData(dir string) (volData, error) {
	var d volData
	b, err := os.ReadFile(filepath.Join(dir, volDataFileName))
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(b, &d)
}

// noteInUse records that the pod in podDir wants the volume; an
// attachable one is then reported in the Node's status.volumesInUse.
func (m *Mounter) noteInUse(cv *csiVolume, podDir string, attach bool) {
	if !attach {
		return
	}
	m.mu.Lock()
	if m.inUse == nil {
		m.inUse = map[v1.UniqueVolumeName]map[string]bool{}
	}
	n := uniqueName(cv.driver, cv.handle)
	added := m.inUse[n] == nil
	if added {
		m.inUse[n] = map[string]bool{}
	}
	m.inUse[n][podDir] = true
	m.mu.Unlock()
	if added {
		m.inUseChanged()
	}
}

func (m *Mounter) forget(driver, handle, podDir string) {
	m.mu.Lock()
	n := uniqueName(driver, handle)
	delete(m.inUse[n], podDir)
	removed := false
	if _, ok := m.inUse[n]; ok && len(m.inUse[n]) == 0 {
		delete(m.inUse, n)
		removed = true
	}
	m.mu.Unlock()
	if removed {
		m.inUseChanged()
	}
}

// forgetPodInUse drops the pod in podDir from every volume it was noted
// in use for: its teardown finished, so it has nothing mounted, also for
// a volume whose set-up never got as far as its directory (a pod deleted
// while it waited for the attachment), which no vol_data.json names.
func (m *Mounter) forgetPodInUse(podDir string) {
	m.mu.Lock()
	removed := false
	for n, pods := range m.inUse {
		if !pods[podDir] {
			continue
		}
		delete(pods, podDir)
		if len(pods) == 0 {
			delete(m.inUse, n)
			removed = true
		}
	}
	m.mu.Unlock()
	if removed {
		m.inUseChanged()
	}
}

func (m *Mounter) inUseChanged() {
	if m.InUseChanged != nil {
		m.InUseChanged()
	}
}

// inUseWait bounds how long a mount waits for its volume to be reported
// in use (kubelet's pod worker waits up to 2 minutes for its volumes;
// here the pod's sync fails with kubelet's message after this and is
// retried with the worker's back-off, so a node whose status cannot be
// written does not hold a pod's sync longer).
const inUseWait = 10 * time.Second

// inUseMessage is kubelet's error (operation_generator.go
// VerifyControllerAttachedVolume) while the volume is not reported.
const inUseMessage = "Volume has not been added to the list of VolumesInUse in the node's volume status"

// MarkVolumesReportedInUse records the volumes the Node's
// status.volumesInUse held when the node status was last written, or
// computed with no write needed: kubelet's MarkVolumesAsReportedInUse
// (after a successful status write, with the written Node's list; with the
// Node's own list when there was nothing to write), which replaces the
// set, so a volume not in names is not reported (any more). It must not
// block: the node status calls it.
func (m *Mounter) MarkVolumesReportedInUse(names []v1.UniqueVolumeName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reported = make(map[v1.UniqueVolumeName]bool, len(names))
	for _, n := range names {
		m.reported[n] = true
	}
	if m.reportedCh != nil {
		close(m.reportedCh)
		m.reportedCh = nil
	}
}

// waitReportedInUse waits until the attachable volume cv has been reported
// in the Node's status.volumesInUse (MarkVolumesReportedInUse), as kubelet
// mounts an attachable volume only then (its reconciler checks
// ReportedInUse before VerifyControllerAttachedVolume): from that write on
// the attach/detach controller does not detach the volume under the
// mount. At most inUseWait, then kubelet's error.
func (m *Mounter) waitReportedInUse(ctx context.Context, cv *csiVolume) error {
	n := uniqueName(cv.driver, cv.handle)
	var timeout <-chan time.Time
	for {
		m.mu.Lock()
		if m.reported[n] {
			m.mu.Unlock()
			return nil
		}
		if m.reportedCh == nil {
			m.reportedCh = make(chan struct{})
		}
		ch := m.reportedCh
		m.mu.Unlock()
		if timeout == nil {
			timeout = m.clock().After(inUseWait)
		}
		select {
		case <-ch:
		case <-timeout:
			return &opError{op: "VerifyControllerAttachedVolume", prefix: inUseMessage,
				err: fmt.Errorf("no node status write listed %s within %v", n, inUseWait)}
		case <-ctx.Done():
			return &opError{op: "VerifyControllerAttachedVolume", prefix: inUseMessage, err: ctx.Err()}
		}
	}
}

// VolumesInUse lists the attachable volumes that pods on this node want or
// still have mounted, sorted: the Node's status.volumesInUse, which keeps
// the attach/detach controller from detaching them.
func (m *Mounter) VolumesInUse() []v1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]v1.UniqueVolumeName, 0, len(m.inUse))
	for n := range m.inUse {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TearDown unpublishes every CSI volume of the pod in podDir
// (NodeUnpublishVolume, then its directory goes) and unstages a volume
// that no other pod has published (NodeUnstageVolume, then its staging
// directory goes). It works from the vol_data.json files, so after an
// agent restart too; a driver that is not registered is an error (retried
// by the caller), and nothing is unmounted behind the driver's back.
func (m *Mounter) TearDown(ctx context.Context, podDir string) error {
	var errs []error
	if err := m.tearDownBlock(ctx, podDir); err != nil {
		errs = append(errs, err)
	}
	base := filepath.Join(podDir, "volumes", podPluginDir)
	es, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		if len(errs) == 0 {
			m.forgetPod(filepath.Base(podDir))
			m.forgetPodInUse(podDir)
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range es {
		if err := m.tearDownOne(ctx, podDir, filepath.Join(base, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", e.Name(), err))
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		m.forgetPod(filepath.Base(podDir))
		m.forgetPodInUse(podDir)
	}
	return errors.Join(errs...)
}

func (m *Mounter) tearDownOne(ctx context.Context, podDir, dir string) error {
	target := filepath.Join(dir, podMountDir)
	data, err := readVolData(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// A directory without its data file was never published.
		if mounted, _ := isMountPoint(target); mounted {
			return fmt.Errorf("kubernetes.io/csi: %s is mounted but has no %s", target, volDataFileName)
		}
		return os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("kubernetes.io/csi: unmounter failed to load volume data file [%s]: %v", dir, err)
	}
	d, ok := m.Drivers.Driver(data.DriverName)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: unmounter failed to get CSI client: driver name %s not found in the list of registered CSI drivers", data.DriverName)
	}
	defer m.lock(data.DriverName, data.VolumeHandle)()
	uctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodeUnpublishVolume(uctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: target}); err != nil {
		return rpcError(err)
	}
	if mounted, _ := isMountPoint(target); mounted {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnpublishVolume", target)
	}
	// The pod's volume directory (its vol_data.json) goes only after the
	// unstage: an agent killed in between finds it at its next start and
	// finishes the teardown (unpublish again, a no-op; unstage), where
	// removing it first would leave the staging mount to nobody.
	if storagev1.VolumeLifecycleMode(data.VolumeLifecycleMode) != storagev1.VolumeLifecycleEphemeral {
		if err := m.unstageIfUnused(ctx, d, data, podDir); err != nil {
			return fmt.Errorf("UnmountDevice: %w", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	m.forget(data.DriverName, data.VolumeHandle, podDir)
	return nil
}

// usedElsewhere reports whether a pod other than the one in podDir has
// the volume published (kubelet's IsVolumeMountedElsewhere): its volume
// directory names the volume and its target is a mount point.
func (m *Mounter) usedElsewhere(cv *csiVolume, podDir string) bool {
	users, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", podPluginDir, "*", volDataFileName))
	if err != nil {
		return false
	}
	for _, u := range users {
		dir := filepath.Dir(u)
		if filepath.Dir(filepath.Dir(filepath.Dir(dir))) == filepath.Clean(podDir) {
			continue
		}
		o, err := readVolData(dir)
		if err != nil || o.DriverName != cv.driver || o.VolumeHandle != cv.handle {
			continue
		}
		if mounted, _ := isMountPoint(filepath.Join(dir, podMountDir)); mounted {
			return true
		}
	}
	return false
}

// unstageIfUnused is kubelet's UnmountDevice once no pod's volume
// directory names the volume any more.
func (m *Mounter) unstageIfUnused(ctx context.Context, d *Driver, data volData, leaving string) error {
	dir := m.stagingDir(data.DriverName, data.VolumeHandle)
	if _, err := os.Stat(filepath.Join(dir, volDataFileName)); errors.Is(err, fs.ErrNotExist) {
		return nil // never staged (the driver does not stage)
	}
	users, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", podPluginDir, "*", volDataFileName))
	if err != nil {
		return err
	}
	for _, u := range users {
		if filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(u)))) == filepath.Clean(leaving) {
			continue
		}
		if o, err := readVolData(filepath.Dir(u)); err == nil && o.DriverName == data.DriverName && o.VolumeHandle == data.VolumeHandle {
			return nil
		}
	}
	staging := filepath.Join(dir, globalMount)
	uctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := d.Node.NodeUnstageVolume(uctx, &csipb.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: staging}); err != nil {
		return rpcError(err)
	}
	if mounted, _ := isMountPoint(staging); mounted {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnstageVolume", staging)
	}
	return os.RemoveAll(dir)
}

// isMountPoint reports whether p is a mount point of the agent's mount
// namespace.
func isMountPoint(p string) (bool, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false, err
	}
	ms, err := mountinfo.Read()
	if err != nil {
		return false, err
	}
	for _, mi := range ms {
		if mi.MountPoint == resolved {
			return true, nil
		}
	}
	return false, nil
}
