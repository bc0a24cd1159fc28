// go-manager on a real API server (envtest with the project's kube-apiserver and etcd: KUBEBUILDER_ASSETS, as
// test/integration/go-modules.test.ts sets it): a sample ModuleConfig becomes a SyncResource holding its ConfigMap.
package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/skr-watcher/skr-watcher/api/go/modulemanager"
	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

func sampleConfig(spec string) *v1alpha1.ModuleConfig {
	return &v1alpha1.ModuleConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-1-sample", Namespace: modulemanager.DefaultNamespace, Labels: map[string]string{modulemanager.LabelModuleName: moduleName}},
		Spec: v1alpha1.ModuleConfigSpec{Kyma: "kyma-1", Module: moduleName, Resource: v1alpha1.MirroredResource{
			APIVersion: "operator.kyma-project.io/v1alpha1", Kind: "Sample",
			Metadata: v1alpha1.MirroredResourceMetadata{Name: "default"},
			Spec:     &runtime.RawExtension{Raw: []byte(spec)},
		}},
	}
}

func TestRenderSampleRendersGreetingAndReplicasOnly(t *testing.T) {
	items, err := renderSample(context.Background(), sampleConfig(`{"greeting":"hi","replicas":3,"other":true}`))
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, error %v", items, err)
	}
	data := items[0].Object.Object["data"].(map[string]any)
	if len(data) != 3 || data["greeting"] != "hi" || data["replicas"] != "3" || data["module"] != moduleName {
		t.Fatalf("data %v", data)
	}
	items, _ = renderSample(context.Background(), sampleConfig(`{"greeting":7}`))
	if data := items[0].Object.Object["data"].(map[string]any); len(data) != 1 {
		t.Fatalf("a greeting that is no string was rendered: %v", data)
	}
}

func TestGoManagerRendersASampleModuleConfigIntoASyncResource(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: point it at the project's kube-apiserver and etcd (node packages/testenv/dist/cli.js binaries)")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "manifests", "crds")}, ErrorIfCRDPathMissing: true,
		// Two busy cores start a kube-apiserver slowly.
		ControlPlaneStartTimeout: 2 * time.Minute}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	defer func() { _ = env.Stop() }()
	mgr, err := newManager(cfg, modulemanager.DefaultNamespace, "0", "0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	}()
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: modulemanager.DefaultNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, sampleConfig(`{"greeting":"hello from Go","replicas":2}`)); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: modulemanager.DefaultNamespace, Name: modulemanager.SyncResourceName(managerName, "kyma-1-sample")}
	var sync v1alpha1.SyncResource
	deadline := time.Now().Add(30 * time.Second)
	for c.Get(ctx, key, &sync) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no SyncResource %s", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(sync.Spec.Items) != 1 {
		t.Fatalf("items %+v", sync.Spec.Items)
	}
	resource := sync.Spec.Items[0].Resource
	data := resource.Object["data"].(map[string]any)
	if resource.GetKind() != "ConfigMap" || resource.GetNamespace() != configMapNamespace || resource.GetName() != configMapName ||
		data["greeting"] != "hello from Go" || data["replicas"] != "2" {
		t.Fatalf("rendered %v", resource.Object)
	}
}
