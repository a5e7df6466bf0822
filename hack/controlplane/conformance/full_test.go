//go:build conformancefull

package conformance

// The full [Conformance] suite (hack/conformance.sh --set=full, make
// conformance-full): built only with the conformancefull tag, since it
// imports every SIG package of test/e2e that has [Conformance] specs and
// compiles for several times as long as the node selection make test
// uses. hack/conformance.sh keys the two binaries apart (this file is
// only in the full one's key).
import (
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/architecture"
	_ "k8s.io/kubernetes/test/e2e/auth"
	_ "k8s.io/kubernetes/test/e2e/common"
	_ "k8s.io/kubernetes/test/e2e/instrumentation"
	_ "k8s.io/kubernetes/test/e2e/kubectl"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/scheduling"
	_ "k8s.io/kubernetes/test/e2e/storage"

	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"
)

// The full set's selection: every [Conformance] spec. The [Serial] ones
// carry ginkgo's Serial decorator (framework.WithSerial), so in a parallel
// run ginkgo runs them one at a time on process 1 after all the others have
// finished. fullNoImage is what this machine cannot run.
func init() {
	selections["full"] = selection{focus: []string{`\[Conformance\]`}, skip: fullNoImage}
	// The manifests and fixtures the sig-cli specs (guestbook, kubectl
	// describe/expose/patch/label/diff, Update Demo) read, embedded as
	// test/e2e's own TestMain embeds them ("no file sources registered"
	// without them).
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
}

// fullNoImage are the [Conformance] specs that need an image that is
// neither built here (hack/conformance.sh, testimage.E2EStandIns) nor can
// be pulled (no internet); hack/conformance/full/known-failures.txt lists
// them as "not run", with the image.
var fullNoImage = []string{
	// registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2 (and etcd
	// 3.6.4-0 beside it in the pod).
	`\[sig-api-machinery\] Aggregator Should be able to support the 1\.17 Sample API Server using the current Aggregator`,
}
