// Package podtest holds pod fixtures that the pod packages' tests share.
package podtest

import (
	v1 "k8s.io/api/core/v1"
	utilptr "k8s.io/utils/ptr"
)

// KubeAPIAccess is the volume the API server's ServiceAccount admission
// adds to a pod (defaulted).
func KubeAPIAccess() v1.Volume {
	return v1.Volume{Name: "kube-api-access-x2b4k", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: utilptr.To[int32](0o644),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: utilptr.To[int64](3607)}},
			{ConfigMap: &v1.ConfigMapProjection{
				LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}
