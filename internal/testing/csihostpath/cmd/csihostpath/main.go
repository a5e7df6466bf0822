// Command csihostpath runs package csihostpath's CSI node plugin
// (-mode=driver: the Identity, Node and Controller services), its
// controller (-mode=controller: Identity and Controller, for the
// controller Deployment's external-provisioner, external-resizer and
// external-attacher, hack/csi-sidecars/controller.yaml) or its registrar (-mode=registrar)
// until SIGTERM, then
// removes its socket (a registrar's socket going away deregisters the
// driver).
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodeagent/nodeagent/internal/testing/csihostpath"
)

func main() {
	mode := flag.String("mode", "driver", "driver, controller or registrar")
	name := flag.String("drivername", "hostpath.csi.k8s.io", "the CSI driver's name")
	endpoint := flag.String("endpoint", "", "driver: the socket to serve CSI on")
	nodeID := flag.String("nodeid", "", "driver, controller: the node ID (and topology value)")
	dataDir := flag.String("datadir", "/csi-data-dir", "driver: where volumes live")
	regSocket := flag.String("registration-socket", "", "registrar: the socket in the agent's plugins_registry")
	kubeletPath := flag.String("kubelet-registration-path", "", "registrar: the driver's socket as the agent sees it")
	attach := flag.Bool("enable-attach", false, "driver, controller: the driver attaches (PUBLISH_UNPUBLISH_VOLUME; its CSIDriver says attachRequired)")
	record := flag.String("record-publish", "", "driver: a file to append every NodePublishVolume's volume ID, target path and volume context to (JSON lines)")
	topology := flag.Bool("enable-topology", true, "driver, controller: VOLUME_ACCESSIBILITY_CONSTRAINTS, the topology key "+csihostpath.TopologyKey+" with the node ID as its value (the controller needs -nodeid)")
	maxVolumes := flag.Int64("maxvolumespernode", 0, "driver: NodeGetInfo's max_volumes_per_node (0: no limit)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	s := grpc.NewServer()
	sock := *endpoint
	switch *mode {
	case "driver":
		d := &csihostpath.Driver{Name: *name, NodeID: *nodeID, DataDir: *dataDir, EnableTopology: *topology, MaxVolumes: *maxVolumes, EnableAttach: *attach, PublishRecord: *record}
		csipb.RegisterIdentityServer(s, d)
		csipb.RegisterNodeServer(s, d)
		csipb.RegisterControllerServer(s, d)
	case "controller":
		if *topology && *nodeID == "" {
			// Its volumes are on the node whose data directory it shares.
			log.Fatal("-mode=controller -enable-topology needs -nodeid (the node of its data directory)")
		}
		d := &csihostpath.Driver{Name: *name, NodeID: *nodeID, DataDir: *dataDir, EnableTopology: *topology, EnableAttach: *attach}
		csipb.RegisterIdentityServer(s, d)
		csipb.RegisterControllerServer(s, d)
	case "registrar":
		sock = *regSocket
		registerapi.RegisterRegistrationServer(s, &csihostpath.Registrar{
			DriverName: *name, Endpoint: *kubeletPath,
			Failed: func(string) { os.Remove(sock); os.Exit(1) },
		})
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		s.Stop()
	}()
	log.Printf("%s serving on %s", *mode, sock)
	if err := s.Serve(l); err != nil {
		log.Print(err)
	}
	_ = os.Remove(sock)
	log.Printf("%s stopped", *mode)
}
