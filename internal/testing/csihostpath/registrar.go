package csihostpath

import (
	"context"
	"log"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registrar is node-driver-registrar's registration server: it tells the
// node agent the driver's name, its endpoint as the agent sees it, and
// the CSI versions it speaks.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer

	DriverName, Endpoint string
	// Failed is called when the agent reports that the registration
	// failed (node-driver-registrar then exits, to be restarted).
	Failed func(msg string)
}

func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.DriverName, Endpoint: r.Endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *Registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("registration process failed with error: %s", s.Error)
		if r.Failed != nil {
			r.Failed(s.Error)
		}
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	log.Printf("registered %s with the node agent", r.DriverName)
	return &registerapi.RegistrationStatusResponse{}, nil
}
