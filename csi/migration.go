package csi

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
	"k8s.io/klog/v2"
)

// CSI migration, as kubelet 1.34 (pkg/volume/csimigration): a PV or an
// inline pod volume with an in-tree source of a migrated plugin is
// translated by k8s.io/csi-translation-lib to the CSI volume of the
// plugin's driver and set up through that driver like any CSI volume
// (same paths, same unique volume name in volumesInUse,
// kubernetes.io/csi/<driver>^<translated handle>, which is what the
// attach/detach controller, translating the same way, attaches).

// MigratedPlugins are the in-tree plugins kubelet 1.34 migrates: all
// seven that csi-translation-lib translates, their CSIMigration* gates
// being GA and locked to true (CSIMigrationPortworx included, GA in
// 1.33). Sorted, as kubelet writes them in the CSINode annotation.
var MigratedPlugins = func() []string {
	p := []string{
		csiplugins.AWSEBSInTreePluginName,
		csiplugins.GCEPDInTreePluginName,
		csiplugins.AzureDiskInTreePluginName,
		csiplugins.AzureFileInTreePluginName,
		csiplugins.CinderInTreePluginName,
		csiplugins.VSphereInTreePluginName,
		csiplugins.PortworxVolumePluginName,
	}
	slices.Sort(p)
	return p
}()

var translator = csitrans.New()

// migratedPlugin is the migrated in-tree plugin of a PV or an inline pod
// volume ("" for none: a CSI, hostPath, local or unsupported source).
func migratedPlugin(pv *v1.PersistentVolume, vol *v1.Volume) string {
	name, err := translator.GetInTreePluginNameFromSpec(pv, vol)
	if err != nil || !slices.Contains(MigratedPlugins, name) {
		return ""
	}
	return name
}

// IsMigratedInline reports whether a pod volume has an in-tree source that
// kubelet mounts through CSI migration.
func IsMigratedInline(v *v1.Volume) bool {
	return migratedPlugin(nil, v) != ""
}

// translatePV is kubelet's TranslateInTreeSpecToCSI for a PV: the PV with
// its in-tree source replaced by the driver's CSI source (the same name).
func translatePV(pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	csiPV, err := translator.TranslateInTreePVToCSI(klog.Background(), pv)
	if err != nil {
		return nil, fmt.Errorf("failed to translate in-tree pv to CSI: %v", err)
	}
	return csiPV, nil
}

// translateInline is kubelet's TranslateInTreeSpecToCSI for an inline
// volume: a PV named by the translation (<driver>-<disk> and the like),
// which names the pod's volume directory and the staging path.
func translateInline(v *v1.Volume, namespace string) (*v1.PersistentVolume, error) {
	csiPV, err := translator.TranslateInTreeInlineVolumeToCSI(klog.Background(), v, namespace)
	if err != nil {
		return nil, fmt.Errorf("failed to translate in-tree pv to CSI: %v", err)
	}
	if csiPV.Spec.CSI == nil {
		return nil, fmt.Errorf("failed to translate in-tree pv to CSI: volume %s has no CSI source after translation", v.Name)
	}
	return csiPV, nil
}

// setMigrationAnnotation is kubelet's nodeinfomanager's: the CSINode's
// storage.alpha.kubernetes.io/migrated-plugins annotation lists the
// migrated plugins (sorted, comma-separated), so the attach/detach
// controller attaches this node's in-tree volumes through CSI. It
// reports whether c changed (the set of names differs).
func setMigrationAnnotation(c *storagev1.CSINode) bool {
	cur := c.Annotations[v1.MigratedPluginsAnnotationKey]
	var have []string
	if cur != "" {
		have = strings.Split(cur, ",")
	}
	slices.Sort(have)
	have = slices.Compact(have)
	if slices.Equal(have, MigratedPlugins) {
		return false
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[v1.MigratedPluginsAnnotationKey] = strings.Join(MigratedPlugins, ",")
	return true
}
