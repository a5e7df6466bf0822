package volume

import "k8s.io/apimachinery/pkg/runtime/schema"

var secretResource = schema.GroupResource{Resource: "secret"}
