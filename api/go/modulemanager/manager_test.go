// The helper on a real API server (envtest with the project's kube-apiserver and etcd: KUBEBUILDER_ASSETS, as
// test/integration/go-modules.test.ts sets it). The lifecycle manager's report on a SyncResource is written here
// through the API server, as skr-agent writes it.
package modulemanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

const testManager = "go-test-manager"

// renderGreeting renders the Sample CR's greeting as a ConfigMap; the greeting "fail" is a render error.
func renderGreeting(_ context.Context, config *v1alpha1.ModuleConfig) ([]Item, error) {
	var spec struct {
		Greeting string `json:"greeting"`
	}
	if raw := config.Spec.Resource.Spec; raw != nil {
		if err := json.Unmarshal(raw.Raw, &spec); err != nil {
			return nil, err
		}
	}
	if spec.Greeting == "fail" {
		return nil, errors.New("greeting fail")
	}
	if spec.Greeting == "" {
		return nil, nil
	}
	return []Item{{Object: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "sample-config", "namespace": "kyma-system"},
		"data":     map[string]any{"greeting": spec.Greeting},
	}}}}, nil
}

func startEnvironment(t *testing.T) client.Client {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: point it at the project's kube-apiserver and etcd (node packages/testenv/dist/cli.js binaries)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
		// Two busy cores start a kube-apiserver slowly.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	scheme := runtime.NewScheme()
	// The cache options name the v1alpha1 kinds: the scheme must know them before the manager is made.
	if err := clientgoscheme.AddToScheme(scheme); err != nil || v1alpha1.AddToScheme(scheme) != nil {
		t.Fatal(err)
	}
	options := Options{Name: testManager, Module: "sample", Render: renderGreeting}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  CacheOptions(options),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	if err := SetupWithManager(mgr, options); err != nil {
		t.Fatalf("set up the module manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DefaultNamespace}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func moduleConfig(name, greeting string, other int) *v1alpha1.ModuleConfig {
	return &v1alpha1.ModuleConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: map[string]string{LabelModuleName: "sample"}},
		Spec: v1alpha1.ModuleConfigSpec{Kyma: "kyma-1", Module: "sample", Resource: v1alpha1.MirroredResource{
			APIVersion: "operator.kyma-project.io/v1alpha1", Kind: "Sample",
			Metadata: v1alpha1.MirroredResourceMetadata{Name: "default"},
			Spec:     &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"greeting":%q,"other":%d}`, greeting, other)},
		}},
	}
}

// condition returns the manager's condition once it speaks for the ModuleConfig's current generation.
func condition(ctx context.Context, c client.Client, name string) (*metav1.Condition, error) {
	var config v1alpha1.ModuleConfig
	if err := c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, &config); err != nil {
		return nil, err
	}
	if config.Status == nil {
		return nil, errors.New("no status")
	}
	found := meta.FindStatusCondition(config.Status.Conditions, ConditionType(testManager))
	if found == nil || found.ObservedGeneration != config.Generation {
		return nil, fmt.Errorf("no condition for generation %d: %v", config.Generation, config.Status.Conditions)
	}
	return found, nil
}

func TestTheManagerKeepsOneSyncResourcePerModuleConfigAndReportsOnIt(t *testing.T) {
	c := startEnvironment(t)
	ctx := context.Background()
	config := moduleConfig("kyma-1-sample", "hello", 1)
	if err := c.Create(ctx, config); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: DefaultNamespace, Name: SyncResourceName(testManager, config.Name)}
	var sync v1alpha1.SyncResource
	eventually(t, "the SyncResource is applied", func() error { return c.Get(ctx, key, &sync) })

	if got := sync.Labels; got[LabelManagedBy] != testManager || got[LabelModuleName] != "sample" || got[LabelKymaName] != "kyma-1" {
		t.Errorf("labels %v", got)
	}
	if owners := sync.OwnerReferences; len(owners) != 1 || owners[0].Kind != "ModuleConfig" || owners[0].UID != config.UID {
		t.Errorf("owner references %v", owners)
	}
	if items := sync.Spec.Items; len(items) != 1 || items[0].Name != "configmap.kyma-system.sample-config" ||
		items[0].Strategy != StrategyCreateAndSync || items[0].Resource.Object["data"].(map[string]any)["greeting"] != "hello" {
		t.Fatalf("items %+v", items)
	}
	applier := ""
	for _, entry := range sync.ManagedFields {
		if entry.Operation == metav1.ManagedFieldsOperationApply {
			applier = entry.Manager
		}
	}
	if applier != testManager {
		t.Errorf("applied by %q, want the manager's own field owner %q", applier, testManager)
	}

	// The agent's report: every item applied for this generation.
	ready, observed := "Ready", sync.Generation
	sync.Status = &v1alpha1.SyncResourceStatus{State: &ready, ObservedGeneration: &observed,
		Items: []v1alpha1.SyncItemStatus{{Name: sync.Spec.Items[0].Name, State: "Ready"}}}
	if err := c.Status().Update(ctx, &sync, client.FieldOwner("skr-watcher-agent")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the condition says Applied", func() error {
		got, err := condition(ctx, c, config.Name)
		if err == nil && (got.Reason != ReasonApplied || got.Status != metav1.ConditionTrue) {
			err = fmt.Errorf("condition %+v", got)
		}
		return err
	})

	// A change of a field the manager does not render: a new generation, the same items, no SyncResource write.
	var before v1alpha1.SyncResource
	if err := c.Get(ctx, key, &before); err != nil {
		t.Fatal(err)
	}
	update(t, ctx, c, config.Name, "hello", 2)
	eventually(t, "the condition speaks for the new generation", func() error {
		_, err := condition(ctx, c, config.Name)
		return err
	})
	var after v1alpha1.SyncResource
	if err := c.Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the SyncResource was written although the rendered items did not change (generation %d → %d)", before.Generation, after.Generation)
	}

	// A rendered change: a new SyncResource generation with the new item; no report yet, so Pending.
	update(t, ctx, c, config.Name, "servus", 2)
	eventually(t, "the condition says Pending for the new items", func() error {
		got, err := condition(ctx, c, config.Name)
		if err == nil && got.Reason != ReasonPending {
			err = fmt.Errorf("condition %+v", got)
		}
		return err
	})
	if err := c.Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation+1 || after.Spec.Items[0].Resource.Object["data"].(map[string]any)["greeting"] != "servus" {
		t.Errorf("SyncResource generation %d, items %+v", after.Generation, after.Spec.Items)
	}

	// A render error is reported and leaves the SyncResource as it was.
	update(t, ctx, c, config.Name, "fail", 2)
	eventually(t, "the condition says RenderFailed", func() error {
		got, err := condition(ctx, c, config.Name)
		if err == nil && (got.Reason != ReasonRenderFailed || got.Message != "render() threw: greeting fail") {
			err = fmt.Errorf("condition %+v", got)
		}
		return err
	})

	// The ModuleConfig goes: so does its SyncResource (envtest runs no garbage collector; the manager deletes it).
	if err := c.Delete(ctx, config); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the SyncResource is deleted", func() error {
		if err := c.Get(ctx, key, &after); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

func update(t *testing.T, ctx context.Context, c client.Client, name, greeting string, other int) {
	t.Helper()
	var config v1alpha1.ModuleConfig
	if err := c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, &config); err != nil {
		t.Fatal(err)
	}
	config.Spec.Resource.Spec = moduleConfig(name, greeting, other).Spec.Resource.Spec
	if err := c.Update(ctx, &config); err != nil {
		t.Fatal(err)
	}
}
