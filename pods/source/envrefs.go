package source

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// envAPIRefs are the ConfigMaps and Secrets a pod's containers' env and
// envFrom reference: a static pod may not (kubelet's
// PreventStaticPodAPIReferences; the node may read them only for pods
// bound to it through the API).
func envAPIRefs(pod *v1.Pod) []error {
	var errs []error
	cm := func(p *field.Path) {
		errs = append(errs, field.Forbidden(p, "a static pod may not reference a ConfigMap"))
	}
	secret := func(p *field.Path) {
		errs = append(errs, field.Forbidden(p, "a static pod may not reference a Secret"))
	}
	spec := field.NewPath("spec")
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i, c := range list.cs {
			cp := spec.Child(list.name).Index(i)
			for j, ef := range c.EnvFrom {
				p := cp.Child("envFrom").Index(j)
				if ef.ConfigMapRef != nil {
					cm(p.Child("configMapRef"))
				}
				if ef.SecretRef != nil {
					secret(p.Child("secretRef"))
				}
			}
			for j, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				p := cp.Child("env").Index(j).Child("valueFrom")
				if e.ValueFrom.ConfigMapKeyRef != nil {
					cm(p.Child("configMapKeyRef"))
				}
				if e.ValueFrom.SecretKeyRef != nil {
					secret(p.Child("secretKeyRef"))
				}
			}
		}
	}
	return errs
}
