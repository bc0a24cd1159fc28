package modulemanager

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

// The labels the lifecycle manager (skr-agent) and the managers agree on.
const (
	// LabelModuleName is on every ModuleConfig and SyncResource: the module it belongs to.
	LabelModuleName = "operator.kyma-project.io/module-name"
	// LabelManagedBy on a SyncResource names the manager that writes it.
	LabelManagedBy = "operator.kyma-project.io/managed-by"
	// LabelKymaName on a SyncResource names its Kyma (left out when longer than a label value may be).
	LabelKymaName = "operator.kyma-project.io/kyma-name"
	// DefaultNamespace is where the agent keeps ModuleConfigs and SyncResources in the KCP.
	DefaultNamespace = "kcp-system"
)

// The reasons of a manager's condition: a fixed set, so dashboards and alerts can rely on them.
const (
	// ReasonApplied: every item is applied in the SKR, for the ModuleConfig generation in observedGeneration.
	ReasonApplied = "Applied"
	// ReasonPending: the SyncResource is written; the lifecycle manager has not reported on this version yet.
	ReasonPending = "Pending"
	// ReasonItemsFailed: some items were refused (allow-list) or failed; the message lists them.
	ReasonItemsFailed = "ItemsFailed"
	// ReasonRenderFailed: render failed or returned something unusable; the SyncResource is left as it was.
	ReasonRenderFailed = "RenderFailed"
	// ReasonNothingToSync: render returned no objects, so there is no SyncResource.
	ReasonNothingToSync = "NothingToSync"
)

// The strategies of a SyncResource item.
const (
	// StrategyCreateAndSync keeps the object as rendered: drift in the SKR is put back (the default).
	StrategyCreateAndSync = "CreateAndSync"
	// StrategyCreateAndIgnore creates the object once and leaves it to the SKR's users afterwards.
	StrategyCreateAndIgnore = "CreateAndIgnore"
	// StrategyDelete removes the object from the SKR.
	StrategyDelete = "Delete"
)

var strategies = []string{StrategyCreateAndSync, StrategyCreateAndIgnore, StrategyDelete}

const (
	maxName       = 253
	maxLabelValue = 63
	// maxListedFailures keeps a condition message readable; more failing items are summarised.
	maxListedFailures = 10
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// SyncResourceName is the SyncResource of one manager and ModuleConfig, `<manager>-<moduleconfig>`, cut with a hash
// when too long: a restarted manager (or one in another language) finds it again.
func SyncResourceName(manager, moduleConfig string) string {
	name := manager + "-" + moduleConfig
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(name[:maxName-len(hash)-1], "-.") + "-" + hash
}

// ConditionType is the manager's condition on a ModuleConfig: one per manager, so managers of one module and the
// agent never collide.
func ConditionType(manager string) string {
	return manager + "/Synced"
}

// SyncResourceLabels are the labels of a manager's SyncResource for one Kyma.
func SyncResourceLabels(manager, module, kyma string) map[string]string {
	labels := map[string]string{LabelManagedBy: manager, LabelModuleName: module}
	if len(kyma) <= maxLabelValue {
		labels[LabelKymaName] = kyma
	}
	return labels
}

// Item is one object to have in the SKR, with its SyncResource item name and strategy.
type Item struct {
	// Name is the item's name in the SyncResource; empty: `<kind>.<namespace>.<name>` in lower case.
	Name string
	// Strategy is one of the Strategy constants; empty: StrategyCreateAndSync.
	Strategy string
	// Object is the object: apiVersion, kind, metadata.name (and namespace for namespaced kinds).
	Object *unstructured.Unstructured
}

// RenderError says which entry of what render returned cannot become a SyncResource item, and why.
type RenderError struct {
	Message string
}

func (e *RenderError) Error() string { return e.Message }

// ItemName is the default item name of an object: readable and unique per object identity in one SyncResource.
func ItemName(object *unstructured.Unstructured) string {
	parts := []string{object.GetKind()}
	if namespace := object.GetNamespace(); namespace != "" {
		parts = append(parts, namespace)
	}
	return strings.ToLower(strings.Join(append(parts, object.GetName()), "."))
}

func describe(index int, object *unstructured.Unstructured) string {
	what := fmt.Sprintf("render()[%d]", index)
	if object == nil {
		return what
	}
	if kind := object.GetKind(); kind != "" {
		what += " " + kind
	}
	if name := object.GetName(); name != "" {
		what += " " + name
	}
	return what
}

// SyncItems turns what render returned into SyncResource items, or a RenderError for an entry without apiVersion,
// kind or name, an unknown strategy, or two entries with one item name.
func SyncItems(rendered []Item) ([]v1alpha1.SyncItem, error) {
	items := make([]v1alpha1.SyncItem, 0, len(rendered))
	names := map[string]bool{}
	for index, entry := range rendered {
		what := describe(index, entry.Object)
		if entry.Object == nil {
			return nil, &RenderError{what + " is not an object"}
		}
		if entry.Object.GetAPIVersion() == "" {
			return nil, &RenderError{what + ": apiVersion is required"}
		}
		if entry.Object.GetKind() == "" {
			return nil, &RenderError{what + ": kind is required"}
		}
		if entry.Object.GetName() == "" {
			return nil, &RenderError{what + ": metadata.name is required"}
		}
		strategy := entry.Strategy
		if strategy == "" {
			strategy = StrategyCreateAndSync
		}
		known := false
		for _, allowed := range strategies {
			known = known || strategy == allowed
		}
		if !known {
			return nil, &RenderError{fmt.Sprintf("%s: strategy %s is not one of %s", what, strategy, strings.Join(strategies, ", "))}
		}
		name := entry.Name
		if name == "" {
			name = ItemName(entry.Object)
		}
		if names[name] {
			return nil, &RenderError{fmt.Sprintf("%s: item name %s is used twice", what, name)}
		}
		names[name] = true
		items = append(items, v1alpha1.SyncItem{Name: name, Strategy: strategy, Resource: entry.Object.DeepCopy()})
	}
	return items, nil
}

// Report is a condition without its type and times: what became of a SyncResource, or of rendering.
type Report struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// ReportOf reads what the lifecycle manager reported on a SyncResource that carries the current render.
func ReportOf(sync *v1alpha1.SyncResource) Report {
	name, generation, status := sync.Name, sync.Generation, sync.Status
	if status == nil || status.ObservedGeneration == nil || *status.ObservedGeneration != generation {
		shown := "?"
		if generation != 0 {
			shown = fmt.Sprint(generation)
		}
		return Report{metav1.ConditionUnknown, ReasonPending, fmt.Sprintf(
			"SyncResource %s generation %s written; waiting for the lifecycle manager to apply it", name, shown)}
	}
	var failed []string
	for _, item := range status.Items {
		if item.State != "Error" {
			continue
		}
		message := "failed"
		if item.Message != nil {
			message = *item.Message
		}
		failed = append(failed, item.Name+": "+message)
	}
	if len(failed) > 0 {
		listed := failed
		if len(failed) > maxListedFailures {
			listed = append(append([]string{}, failed[:maxListedFailures]...), fmt.Sprintf("and %d more", len(failed)-maxListedFailures))
		}
		return Report{metav1.ConditionFalse, ReasonItemsFailed, fmt.Sprintf(
			"SyncResource %s: %d of %d item(s) not applied: %s", name, len(failed), len(status.Items), strings.Join(listed, "; "))}
	}
	if status.State == nil || *status.State != "Ready" {
		state := "not reported"
		if status.State != nil {
			state = *status.State
		}
		return Report{metav1.ConditionUnknown, ReasonPending, fmt.Sprintf("SyncResource %s is %s", name, state)}
	}
	return Report{metav1.ConditionTrue, ReasonApplied, fmt.Sprintf(
		"SyncResource %s: %d item(s) applied in the SKR", name, len(status.Items))}
}

// NextCondition is the condition to write, keeping lastTransitionTime when the status did not change.
func NextCondition(conditionType string, report Report, observedGeneration int64, previous *metav1.Condition, now time.Time) metav1.Condition {
	transition := metav1.NewTime(now)
	if previous != nil && previous.Status == report.Status {
		transition = previous.LastTransitionTime
	}
	return metav1.Condition{
		Type:               conditionType,
		Status:             report.Status,
		Reason:             report.Reason,
		Message:            report.Message,
		LastTransitionTime: transition,
		ObservedGeneration: observedGeneration,
	}
}

// ConditionChanged says whether writing next would change what previous says (the time alone is no change).
func ConditionChanged(previous *metav1.Condition, next metav1.Condition) bool {
	return previous == nil || previous.Status != next.Status || previous.Reason != next.Reason ||
		previous.Message != next.Message || previous.ObservedGeneration != next.ObservedGeneration
}
