package config

import (
	"errors"
	"strings"
	"testing"
)

const kubeletHdr = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// apiClientFields are the API client fields of c, for comparisons.
type apiClientFields struct {
	KubeAPIQPS, KubeAPIBurst, EventRecordQPS, EventBurst int32
	ContentType                                          string
}

func apiClientsOf(c *NodeAgentConfiguration) apiClientFields {
	return apiClientFields{c.KubeAPIQPS, c.KubeAPIBurst, c.EventRecordQPS, c.EventBurst, c.ContentType}
}

// The API client fields are read from both kinds of file with kubelet
// v1beta1's defaults and zero values, and used without a warning.
func TestAPIClientFields(t *testing.T) {
	// kubelet 1.34's v1beta1 defaults (SetDefaults_KubeletConfiguration).
	kubeletDefaults := apiClientFields{50, 100, 50, 100, "application/vnd.kubernetes.protobuf"}
	for _, tc := range []struct {
		desc, content string
		want          apiClientFields
	}{
		{"nodeagent defaults", hdr, kubeletDefaults},
		{"kubelet defaults", kubeletHdr, kubeletDefaults},
		{
			"nodeagent values", hdr + "kubeAPIQPS: 7\nkubeAPIBurst: 9\neventRecordQPS: 3\neventBurst: 4\ncontentType: application/json\n",
			apiClientFields{7, 9, 3, 4, "application/json"},
		},
		{
			"kubelet values", kubeletHdr + "kubeAPIQPS: 7\nkubeAPIBurst: 9\neventRecordQPS: 3\neventBurst: 4\ncontentType: application/json\n",
			apiClientFields{7, 9, 3, 4, "application/json"},
		},
		{
			// kubelet's QPS fields are pointers: 0 is kept (client-go's
			// default rate); its bursts and contentType are not: their
			// zero value is the default.
			"kubelet zero values", kubeletHdr + "kubeAPIQPS: 0\nkubeAPIBurst: 0\neventRecordQPS: 0\neventBurst: 0\ncontentType: \"\"\n",
			apiClientFields{0, 100, 0, 100, "application/vnd.kubernetes.protobuf"},
		},
		{
			"nodeagent zero values are used as written", hdr + "kubeAPIQPS: 0\nkubeAPIBurst: 0\neventRecordQPS: 0\neventBurst: 0\n",
			apiClientFields{0, 0, 0, 0, "application/vnd.kubernetes.protobuf"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, warnings, err := DecodeBytes("c.yaml", []byte(tc.content))
			if err != nil || len(warnings) != 0 {
				t.Fatalf("DecodeBytes: %v, warnings %q", err, warnings)
			}
			if got := apiClientsOf(cfg); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Negative rates are refused naming the field, with kubelet's wording,
// from either kind of file; so are a QPS without a burst and a content
// type the clients cannot encode.
func TestAPIClientFieldsRefused(t *testing.T) {
	for _, tc := range []struct {
		desc, content string
		want          []string // the problems' lines, in order
	}{
		{
			"negative, nodeagent", hdr + "kubeAPIQPS: -1\nkubeAPIBurst: -2\neventRecordQPS: -3\neventBurst: -4\n",
			[]string{
				"c.yaml:3: kubeAPIQPS: Invalid value: -1: must not be a negative number",
				"c.yaml:4: kubeAPIBurst: Invalid value: -2: must not be a negative number",
				"c.yaml:5: eventRecordQPS: Invalid value: -3: must not be a negative number",
				"c.yaml:6: eventBurst: Invalid value: -4: must not be a negative number",
			},
		},
		{
			"negative, kubelet", kubeletHdr + "eventBurst: -4\nkubeAPIQPS: -1\n",
			[]string{
				"c.yaml:4: kubeAPIQPS: Invalid value: -1: must not be a negative number",
				"c.yaml:3: eventBurst: Invalid value: -4: must not be a negative number",
			},
		},
		{
			"a QPS needs a burst", hdr + "kubeAPIBurst: 0\neventBurst: 0\neventRecordQPS: 1\n",
			[]string{
				"c.yaml:3: kubeAPIBurst: Invalid value: 0: must be greater than 0 when kubeAPIQPS is greater than 0",
				"c.yaml:4: eventBurst: Invalid value: 0: must be greater than 0 when eventRecordQPS is greater than 0",
			},
		},
		{
			"content type", kubeletHdr + "contentType: application/yaml\n",
			[]string{`c.yaml:3: contentType: Unsupported value: "application/yaml": supported values: "application/vnd.kubernetes.protobuf", "application/json"`},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := DecodeBytes("c.yaml", []byte(tc.content))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("DecodeBytes: %v, want a configuration error", err)
			}
			if got := cerr.Lines(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
