package main

import (
	"strings"
	"testing"
)

func TestSymbolOf(t *testing.T) {
	const cbor = "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	for _, tc := range []struct {
		sym, pkg string
		want     bool
	}{
		{cbor + ".NewSerializer", cbor, true},
		{cbor + ".(*serializer).Decode", cbor, true},
		{"type:*" + cbor + ".serializer", cbor, true},
		{"go:itab.*" + cbor + ".serializer,k8s.io/apimachinery/pkg/runtime.Serializer", cbor, true},
		{"k8s.io/client-go/rest.F[" + cbor + ".T]", cbor, true},
		// Its subpackages are another matter: apimachinery's meta types
		// link cbor/direct and cbor/internal/modes.
		{cbor + "/direct.Marshal", cbor, false},
		{cbor + "/internal/modes.init", cbor, false},
		{"example.com/" + cbor + ".F", cbor, false},
		{"k8s.io/client-go/kubernetes.NewForConfig", "k8s.io/client-go/kubernetes/...", true},
		{"k8s.io/client-go/kubernetes/typed/core/v1.(*pods).Get", "k8s.io/client-go/kubernetes/...", true},
		{"k8s.io/client-go/kubernetesx.F", "k8s.io/client-go/kubernetes/...", false},
		{"html/template.(*Template).Execute", "html/template", true},
		{"text/template.(*Template).Execute", "html/template", false},
	} {
		if got := symbolOf(tc.sym, tc.pkg); got != tc.want {
			t.Errorf("symbolOf(%q, %q) = %v, want %v", tc.sym, tc.pkg, got, tc.want)
		}
	}
}

func TestFindUnwanted(t *testing.T) {
	dump := `# example.com/x
_ -> main.main
main.main -> k8s.io/client-go/rest.RESTClientFor
k8s.io/client-go/rest.RESTClientFor -> k8s.io/client-go/rest.CodecFactoryForGeneratedClient
k8s.io/client-go/rest.CodecFactoryForGeneratedClient -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializerInfo
k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializerInfo -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializer
main.main -> k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct.Marshal
go:main.inittasks -> k8s.io/apimachinery/pkg/runtime/serializer/cbor..inittask
k8s.io/apimachinery/pkg/runtime/serializer/cbor..inittask -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.init
k8s.io/apimachinery/pkg/runtime/serializer/cbor.init -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.rawTypeTranscodeFuncs
go:info.main.T -> go:info.map[string]k8s.io/apimachinery/pkg/runtime/serializer/cbor.T
`
	g, err := parseDump(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	hits := findUnwanted(g)
	if len(hits) != 1 {
		t.Fatalf("hits = %+v, want one (the cbor serializer)", hits)
	}
	want := []string{
		"k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializerInfo",
		"k8s.io/client-go/rest.CodecFactoryForGeneratedClient",
		"k8s.io/client-go/rest.RESTClientFor",
		"main.main",
	}
	if h := hits[0]; h.pkg != "k8s.io/apimachinery/pkg/runtime/serializer/cbor" || strings.Join(h.chain, "|") != strings.Join(want, "|") {
		t.Errorf("hit = %+v, want the cbor package reached by %q", h, want)
	}

	clean := strings.ReplaceAll(dump, "rest.CodecFactoryForGeneratedClient -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializerInfo", "rest.CodecFactoryForGeneratedClient -> k8s.io/apimachinery/pkg/runtime/serializer.NewCodecFactory")
	clean = strings.ReplaceAll(clean, "k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializerInfo -> k8s.io/apimachinery/pkg/runtime/serializer/cbor.NewSerializer\n", "")
	g, err = parseDump(strings.NewReader(clean))
	if err != nil {
		t.Fatal(err)
	}
	if hits := findUnwanted(g); len(hits) != 0 {
		t.Errorf("hits = %+v in a dump with only the cbor package's own init and DWARF type information", hits)
	}
}
