// The generated Go types read and write every object the CRD agreement test draws from the generated CRDs
// (testdata/crd-samples.json, written by test/support/crd-samples.ts): JSON → Go → JSON gives the same JSON, and a
// deep copy writes the same JSON again.
package api_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
	"github.com/skr-watcher/skr-watcher/api/go/v1beta2"
)

func schemeOfBothVersions(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatalf("add to scheme: %v", err)
		}
	}
	return scheme
}

// withoutZeroConditionGenerations drops observedGeneration 0 from conditions: metav1.Condition omits it when
// empty, and every reader (the API server's included) takes 0 and absent alike. The one place the JSON may differ.
func withoutZeroConditionGenerations(value any) {
	switch node := value.(type) {
	case map[string]any:
		for key, child := range node {
			if list, isList := child.([]any); isList && key == "conditions" {
				for _, item := range list {
					if condition, isObject := item.(map[string]any); isObject && condition["observedGeneration"] == float64(0) {
						delete(condition, "observedGeneration")
					}
				}
			}
			withoutZeroConditionGenerations(child)
		}
	case []any:
		for _, child := range node {
			withoutZeroConditionGenerations(child)
		}
	}
}

func decoded(t *testing.T, data []byte) any {
	t.Helper()
	var value any
	if err := json.Unmarshal(data, &value); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return value
}

func TestEveryCRDSampleRoundTripsThroughTheGoTypes(t *testing.T) {
	data, err := os.ReadFile("testdata/crd-samples.json")
	if err != nil {
		t.Fatalf("read the samples: %v", err)
	}
	var samples map[string][]json.RawMessage
	if err := json.Unmarshal(data, &samples); err != nil {
		t.Fatalf("decode the samples: %v", err)
	}
	scheme := schemeOfBothVersions(t)
	for gvk, goType := range scheme.AllKnownTypes() {
		generated := strings.HasPrefix(goType.PkgPath(), "github.com/skr-watcher/")
		if generated && !strings.HasSuffix(gvk.Kind, "List") && len(samples[gvk.Kind]) == 0 {
			t.Errorf("no samples of %s: rewrite testdata/crd-samples.json", gvk.Kind)
		}
	}
	for kind, objects := range samples {
		for index, raw := range objects {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatalf("%s[%d]: %v", kind, index, err)
			}
			object, err := scheme.New(schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind))
			if err != nil {
				t.Fatalf("%s[%d]: no Go type: %v", kind, index, err)
			}
			if err := json.Unmarshal(raw, object); err != nil {
				t.Errorf("%s[%d]: the Go type cannot read it: %v\n%s", kind, index, err, raw)
				continue
			}
			written, err := json.Marshal(object)
			if err != nil {
				t.Errorf("%s[%d]: the Go type cannot write it: %v", kind, index, err)
				continue
			}
			want := decoded(t, raw)
			withoutZeroConditionGenerations(want)
			if got := decoded(t, written); !reflect.DeepEqual(got, want) {
				t.Errorf("%s[%d]: JSON changed going through Go\n read:  %s\n wrote: %s", kind, index, raw, written)
				continue
			}
			copied, err := json.Marshal(object.DeepCopyObject())
			if err != nil || string(copied) != string(written) {
				t.Errorf("%s[%d]: the deep copy writes other JSON (%v)\n %s\n %s", kind, index, err, written, copied)
			}
		}
	}
}
