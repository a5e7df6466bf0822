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
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

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
	checkInUse := flag.Bool("check-in-use", false, "driver: log, at each NodeStageVolume and NodePublishVolume of a persistent volume, whether the Node named by -nodeid listed it in status.volumesInUse (reads the Node with the pod's service account token)")
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
		if *checkInUse {
			d.NodeVolumesInUse = func() ([]string, error) { return nodeVolumesInUse(*nodeID) }
		}
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

// The pod's service account token and the cluster's CA, where the
// projected service account volume puts them.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// nodeVolumesInUse GETs the Node and returns its status.volumesInUse, as
// an in-cluster client would (KUBERNETES_SERVICE_HOST/PORT, the service
// account token and CA), with the standard library alone.
func nodeVolumesInUse(node string) ([]string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in ca.crt")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/api/v1/nodes/"+node, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET node %s: %s", node, resp.Status)
	}
	var n struct {
		Status struct {
			VolumesInUse []string `json:"volumesInUse"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return nil, err
	}
	return n.Status.VolumesInUse, nil
}
