// The contract every module manager keeps, whatever its language: the table the TypeScript kit's tests run
// (packages/module-manager/test/contract-cases.json), run against this package.
package modulemanager

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

const contractCases = "../../../packages/module-manager/test/contract-cases.json"

type contract struct {
	SyncResourceNames []struct {
		Manager, ModuleConfig, Expected string
	}
	ConditionTypes []struct{ Manager, Expected string }
	Items          []struct {
		Name     string
		Rendered []map[string]any
		Items    []any
		Error    *string
	}
	Reports []struct {
		Name         string
		SyncResource v1alpha1.SyncResource
		Expected     struct{ Status, Reason, Message string }
	}
	Conditions []struct {
		Name               string
		Type               string
		Input              struct{ Status, Reason, Message string }
		ObservedGeneration int64
		Now                time.Time
		Previous           *metav1.Condition
		Expected           metav1.Condition
		Changed            bool
	}
}

func readContract(t *testing.T) contract {
	t.Helper()
	data, err := os.ReadFile(contractCases)
	if err != nil {
		t.Fatalf("read the shared contract cases: %v", err)
	}
	var c contract
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("decode %s: %v", contractCases, err)
	}
	return c
}

// renderedItem reads an entry as the TypeScript kit does: {strategy, resource[, name]} is an item, anything else an object.
func renderedItem(entry map[string]any) Item {
	resource, isItem := entry["resource"].(map[string]any)
	strategy, hasStrategy := entry["strategy"].(string)
	if !isItem || !hasStrategy {
		return Item{Object: &unstructured.Unstructured{Object: entry}}
	}
	name, _ := entry["name"].(string)
	return Item{Name: name, Strategy: strategy, Object: &unstructured.Unstructured{Object: resource}}
}

func TestSharedContract(t *testing.T) {
	c := readContract(t)
	for _, tc := range c.SyncResourceNames {
		if got := SyncResourceName(tc.Manager, tc.ModuleConfig); got != tc.Expected {
			t.Errorf("SyncResourceName(%q, %d characters) = %q, want %q", tc.Manager, len(tc.ModuleConfig), got, tc.Expected)
		}
	}
	for _, tc := range c.ConditionTypes {
		if got := ConditionType(tc.Manager); got != tc.Expected {
			t.Errorf("ConditionType(%q) = %q, want %q", tc.Manager, got, tc.Expected)
		}
	}
	for _, tc := range c.Items {
		t.Run("items: "+tc.Name, func(t *testing.T) {
			rendered := make([]Item, 0, len(tc.Rendered))
			for _, entry := range tc.Rendered {
				rendered = append(rendered, renderedItem(entry))
			}
			items, err := SyncItems(rendered)
			if tc.Error != nil {
				if err == nil || err.Error() != *tc.Error {
					t.Fatalf("error %v, want %q", err, *tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := jsonValue(items)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.Items; !reflect.DeepEqual(got, want) && !(len(want) == 0 && len(got.([]any)) == 0) {
				t.Fatalf("items\n got  %v\n want %v", got, want)
			}
		})
	}
	for _, tc := range c.Reports {
		t.Run("report: "+tc.Name, func(t *testing.T) {
			got := ReportOf(&tc.SyncResource)
			want := Report{metav1.ConditionStatus(tc.Expected.Status), tc.Expected.Reason, tc.Expected.Message}
			if got != want {
				t.Fatalf("report\n got  %+v\n want %+v", got, want)
			}
		})
	}
	for _, tc := range c.Conditions {
		t.Run("condition: "+tc.Name, func(t *testing.T) {
			report := Report{metav1.ConditionStatus(tc.Input.Status), tc.Input.Reason, tc.Input.Message}
			next := NextCondition(tc.Type, report, tc.ObservedGeneration, tc.Previous, tc.Now)
			want := tc.Expected
			// metav1.Time reads JSON into local time: compare instants in UTC.
			next.LastTransitionTime = metav1.NewTime(next.LastTransitionTime.UTC())
			want.LastTransitionTime = metav1.NewTime(want.LastTransitionTime.UTC())
			if !reflect.DeepEqual(next, want) {
				t.Fatalf("condition\n got  %+v\n want %+v", next, want)
			}
			if changed := ConditionChanged(tc.Previous, next); changed != tc.Changed {
				t.Fatalf("changed = %v, want %v", changed, tc.Changed)
			}
		})
	}
}

func TestSyncResourceLabelsLeaveOutAKymaNameTooLongForALabel(t *testing.T) {
	short := SyncResourceLabels("sample-manager", "sample", "kyma-1")
	if short[LabelKymaName] != "kyma-1" || short[LabelManagedBy] != "sample-manager" || short[LabelModuleName] != "sample" {
		t.Fatalf("labels %v", short)
	}
	long := SyncResourceLabels("sample-manager", "sample", string(make([]byte, 64)))
	if _, has := long[LabelKymaName]; has || len(long) != 2 {
		t.Fatalf("labels %v", long)
	}
}
