// Package modulemanager is the controller-runtime side of a module manager, the same contract as the TypeScript kit
// (@skr-watcher/module-manager): watch the ModuleConfigs of one module in the KCP, render each, keep one SyncResource
// per ModuleConfig by server-side apply under the manager's own field owner, and report the outcome as the
// condition `<manager>/Synced` on the ModuleConfig. Rendered items that did not change cost no write.
package modulemanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

// PendingAfter is how long after its own SyncResource write the manager waits for the agent's report before it
// writes Pending: the agent usually reports within tens of milliseconds, so a healthy edit costs one condition write.
const PendingAfter = time.Second

// deletingRecheck: a SyncResource still being deleted (the agent removes its objects first) is looked at again.
const deletingRecheck = time.Second

// syncResourceWrites counts the manager's SyncResource writes, under the TypeScript kit's metric name.
var syncResourceWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "module_manager_syncresource_writes_total",
	Help: "SyncResource writes (apply, delete) of a module manager.",
}, []string{"manager", "operation"})

func init() {
	metrics.Registry.MustRegister(syncResourceWrites)
}

// RenderFunc is the module team's function: the objects one ModuleConfig (one Module CR of one SKR) asks for.
// An error is reported as RenderFailed, and the SyncResource is left as it was.
type RenderFunc func(ctx context.Context, config *v1alpha1.ModuleConfig) ([]Item, error)

// Options of a module manager.
type Options struct {
	// Name is the manager's name: its field owner, the managed-by label of its SyncResources, and the prefix of its
	// condition type. A DNS label, stable across versions (ownership follows it).
	Name string
	// Module is the module whose ModuleConfigs to watch (their label operator.kyma-project.io/module-name).
	Module string
	// Namespace is where the agent keeps ModuleConfigs and SyncResources; empty: DefaultNamespace.
	Namespace string
	// Render turns one ModuleConfig into the objects to have in its SKR.
	Render RenderFunc
}

func (o Options) namespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

func (o Options) validate() error {
	if !dnsLabel.MatchString(o.Name) {
		return fmt.Errorf("module manager name %q must be a DNS label (a-z, 0-9, -; 63 at most)", o.Name)
	}
	if o.Module == "" {
		return errors.New("module manager: the module name is required")
	}
	if o.Render == nil {
		return errors.New("module manager: Render is required")
	}
	return nil
}

// CacheOptions restricts a manager's cache to what it reads: the ModuleConfigs of its module and its own
// SyncResources, in the agent's namespace. Pass them to ctrl.NewManager (Options.Cache).
func CacheOptions(o Options) cache.Options {
	namespace := o.namespace()
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.ModuleConfig{}: {Label: labels.SelectorFromSet(labels.Set{LabelModuleName: o.Module})},
			&v1alpha1.SyncResource{}: {Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: o.Name, LabelModuleName: o.Module})},
		},
		DefaultFieldSelector: fields.Everything(),
	}
}

// Reconciler keeps the SyncResource and the condition of one ModuleConfig.
type Reconciler struct {
	client  client.Client
	options Options
	now     func() time.Time

	mu sync.Mutex
	// written holds what the last apply of each ModuleConfig's SyncResource returned, until the cache has it: a
	// reconcile in between must neither write the same items again nor take the older cached copy for the truth.
	written map[string]written
}

type written struct {
	spec   any
	object *v1alpha1.SyncResource
	at     time.Time
	seen   bool
}

// SetupWithManager adds a module manager to mgr: ModuleConfigs of the module (created, deleted, or their generation
// changed; the agent's status-only writes do not re-render) and changes of the manager's SyncResources trigger it.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
		return fmt.Errorf("module manager %s: add the v1alpha1 kinds to the scheme: %w", o.Name, err)
	}
	r := &Reconciler{client: mgr.GetClient(), options: o, now: time.Now, written: map[string]written{}}
	inNamespace := predicate.NewPredicateFuncs(func(object client.Object) bool {
		return object.GetNamespace() == o.namespace()
	})
	ofModule := predicate.NewPredicateFuncs(func(object client.Object) bool {
		return object.GetLabels()[LabelModuleName] == o.Module
	})
	mine := predicate.NewPredicateFuncs(func(object client.Object) bool {
		return object.GetLabels()[LabelManagedBy] == o.Name
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(o.Name).
		For(&v1alpha1.ModuleConfig{}, builder.WithPredicates(inNamespace, ofModule, predicate.GenerationChangedPredicate{})).
		// The SyncResource's owner reference is not a controller reference (the agent is no child's controller).
		Owns(&v1alpha1.SyncResource{}, builder.MatchEveryOwner, builder.WithPredicates(inNamespace, mine)).
		Complete(r)
}

// Reconcile renders one ModuleConfig, applies its SyncResource when the items changed, and writes the condition.
func (r *Reconciler) Reconcile(ctx context.Context, request ctrl.Request) (ctrl.Result, error) {
	startedAt := time.Now()
	o := r.options
	syncName := SyncResourceName(o.Name, request.Name)
	logger := log.FromContext(ctx).WithValues("manager", o.Name, "module", o.Module, "moduleConfig", request.Name, "syncResource", syncName)
	var config v1alpha1.ModuleConfig
	if err := r.client.Get(ctx, request.NamespacedName, &config); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get ModuleConfig %s: %w", request.NamespacedName, err)
		}
	}
	var cached v1alpha1.SyncResource
	hasCached := true
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: request.Namespace, Name: syncName}, &cached); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get SyncResource %s/%s: %w", request.Namespace, syncName, err)
		}
		hasCached = false
	}
	existing := hasCached && cached.DeletionTimestamp == nil
	if config.Name == "" || config.DeletionTimestamp != nil {
		r.forget(request.String())
		if existing {
			return ctrl.Result{}, r.deleteSyncResource(ctx, &cached, "ModuleConfig deleted")
		}
		return ctrl.Result{}, nil
	}
	logger = logger.WithValues("kyma", config.Spec.Kyma, "generation", config.Generation)

	rendered, err := o.Render(ctx, &config)
	var items []v1alpha1.SyncItem
	if err == nil {
		items, err = SyncItems(rendered)
	}
	if err != nil {
		logger.Info("render failed; the SyncResource is left as it was", "error", err.Error())
		message := err.Error()
		var renderError *RenderError
		if !errors.As(err, &renderError) {
			message = "render() threw: " + message
		}
		return ctrl.Result{}, r.writeCondition(ctx, &config, Report{metav1.ConditionFalse, ReasonRenderFailed, message})
	}
	if len(items) == 0 {
		r.forget(request.String())
		if existing {
			if err := r.deleteSyncResource(ctx, &cached, "render returned no objects"); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.writeCondition(ctx, &config, Report{metav1.ConditionTrue, ReasonNothingToSync, "render() returned no objects"})
	}
	if hasCached && !existing {
		// Deleted a moment ago (the ModuleConfig went and came back): the agent removes its objects first.
		report := Report{metav1.ConditionUnknown, ReasonPending, fmt.Sprintf("SyncResource %s is still being deleted; it is written again once gone", syncName)}
		return ctrl.Result{RequeueAfter: deletingRecheck}, r.writeCondition(ctx, &config, report)
	}

	desired := r.desiredSyncResource(&config, syncName, items)
	desiredSpec, err := jsonValue(desired.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	current := r.unchanged(request.String(), existing, &cached, desired, desiredSpec)
	if current == nil {
		applied, err := r.apply(ctx, desired)
		if err != nil {
			return ctrl.Result{}, err
		}
		current = applied
		r.remember(request.String(), written{spec: desiredSpec, object: applied, at: r.now()})
		syncResourceWrites.WithLabelValues(o.Name, "apply").Inc()
		// startedAt/appliedAt (epoch ms): the run began, the apply returned (bench:e2e reads them, as from the TS kit).
		logger.Info("SyncResource applied", "items", len(items), "syncResourceGeneration", applied.Generation,
			"startedAt", startedAt.UnixMilli(), "appliedAt", time.Now().UnixMilli())
	} else {
		logger.V(1).Info("rendered objects unchanged; SyncResource not written")
	}

	report := ReportOf(current)
	if report.Reason == ReasonPending {
		if wait := r.pendingWait(request.String(), current); wait > 0 {
			// Our own write, not reported on yet: the agent's report (a SyncResource event) usually comes first.
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	return ctrl.Result{}, r.writeCondition(ctx, &config, report)
}

func (r *Reconciler) desiredSyncResource(config *v1alpha1.ModuleConfig, name string, items []v1alpha1.SyncItem) *v1alpha1.SyncResource {
	o := r.options
	return &v1alpha1.SyncResource{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SyncResource"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: o.namespace(),
			Labels:    SyncResourceLabels(o.Name, o.Module, config.Spec.Kyma),
			// Garbage collection removes it with its ModuleConfig even while no manager runs.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(),
				Kind:       "ModuleConfig",
				Name:       config.Name,
				UID:        config.UID,
			}},
		},
		Spec: v1alpha1.SyncResourceSpec{Kyma: config.Spec.Kyma, Items: items},
	}
}

// unchanged returns the SyncResource that already carries desired (the cached one, or what our last apply returned
// while the cache has not caught up with it), or nil when it must be written.
func (r *Reconciler) unchanged(key string, existing bool, cached, desired *v1alpha1.SyncResource, desiredSpec any) *v1alpha1.SyncResource {
	if existing && upToDate(cached, desired, desiredSpec) {
		return cached
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last, wrote := r.written[key]
	if !wrote {
		return nil
	}
	if existing && cached.Generation >= last.object.Generation {
		// The cache has caught up with our write: from now on what it holds is the truth (a hand edit is put back).
		last.seen = true
		r.written[key] = last
	}
	if !last.seen && reflect.DeepEqual(last.spec, desiredSpec) {
		return last.object
	}
	return nil
}

func upToDate(cached, desired *v1alpha1.SyncResource, desiredSpec any) bool {
	for label, value := range desired.Labels {
		if cached.Labels[label] != value {
			return false
		}
	}
	ownerKept := false
	for _, owner := range cached.OwnerReferences {
		ownerKept = ownerKept || (owner.Kind == "ModuleConfig" && owner.UID == desired.OwnerReferences[0].UID)
	}
	spec, err := jsonValue(cached.Spec)
	return ownerKept && err == nil && reflect.DeepEqual(spec, desiredSpec)
}

// pendingWait is how much longer to wait for the agent's report on our own latest write before writing Pending.
func (r *Reconciler) pendingWait(key string, current *v1alpha1.SyncResource) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, wrote := r.written[key]
	if !wrote || last.object.Generation != current.Generation {
		return 0
	}
	return last.at.Add(PendingAfter).Sub(r.now())
}

func (r *Reconciler) remember(key string, w written) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written[key] = w
}

func (r *Reconciler) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, key)
}

func (r *Reconciler) apply(ctx context.Context, desired *v1alpha1.SyncResource) (*v1alpha1.SyncResource, error) {
	object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, fmt.Errorf("SyncResource %s as an apply configuration: %w", desired.Name, err)
	}
	u := &unstructured.Unstructured{Object: object}
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(r.options.Name), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply SyncResource %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	var applied v1alpha1.SyncResource
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &applied); err != nil {
		return nil, fmt.Errorf("read the applied SyncResource %s: %w", desired.Name, err)
	}
	return &applied, nil
}

func (r *Reconciler) deleteSyncResource(ctx context.Context, sync *v1alpha1.SyncResource, why string) error {
	if err := r.client.Delete(ctx, sync); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete SyncResource %s/%s: %w", sync.Namespace, sync.Name, err)
	}
	syncResourceWrites.WithLabelValues(r.options.Name, "delete").Inc()
	log.FromContext(ctx).Info("SyncResource deleted", "syncResource", sync.Name, "reason", why)
	return nil
}

func (r *Reconciler) writeCondition(ctx context.Context, config *v1alpha1.ModuleConfig, report Report) error {
	conditionType := ConditionType(r.options.Name)
	var previous *metav1.Condition
	if config.Status != nil {
		for i := range config.Status.Conditions {
			if config.Status.Conditions[i].Type == conditionType {
				previous = &config.Status.Conditions[i]
			}
		}
	}
	condition := NextCondition(conditionType, report, config.Generation, previous, r.now())
	if !ConditionChanged(previous, condition) {
		return nil
	}
	conditionJSON, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&condition)
	if err != nil {
		return fmt.Errorf("condition %s as JSON: %w", conditionType, err)
	}
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "ModuleConfig",
		"metadata":   map[string]any{"name": config.Name, "namespace": config.Namespace},
		"status":     map[string]any{"conditions": []any{conditionJSON}},
	}}
	// Its own field owner: the agent's status fields and other managers' conditions stay theirs.
	err = r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner(r.options.Name), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // gone meanwhile; its delete event follows
	}
	if err != nil {
		return fmt.Errorf("apply condition %s of ModuleConfig %s/%s: %w", conditionType, config.Namespace, config.Name, err)
	}
	return nil
}

// jsonValue is v as generic JSON, so a spec read from the cache and a rendered one compare by content.
func jsonValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var value any
	if err := json.Unmarshal(data, &value); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return value, nil
}
