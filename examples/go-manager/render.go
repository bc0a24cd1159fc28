package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/skr-watcher/skr-watcher/api/go/modulemanager"
	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

// The manager's name (its field owner and condition prefix) and module: the same as examples/sample-manager's, so
// either one can run the sample module.
const (
	managerName = "sample-manager"
	moduleName  = "sample"
)

// Where the rendered configuration lands in every SKR: a kind and namespace inside the lifecycle manager's default
// allow-list for SyncResources.
const (
	configMapNamespace = "kyma-system"
	configMapName      = "sample-config"
)

// renderSample turns one ModuleConfig (one Sample CR of one SKR) into one ConfigMap.
func renderSample(_ context.Context, config *v1alpha1.ModuleConfig) ([]modulemanager.Item, error) {
	data := map[string]any{"module": config.Spec.Module}
	if raw := config.Spec.Resource.Spec; raw != nil && len(raw.Raw) > 0 {
		var spec map[string]any
		if err := json.Unmarshal(raw.Raw, &spec); err != nil {
			return nil, fmt.Errorf("read the Sample CR's spec: %w", err)
		}
		// Only greeting (a string) and replicas (a number) are rendered, as in the TypeScript sample.
		if greeting, isString := spec["greeting"].(string); isString {
			data["greeting"] = greeting
		}
		if replicas, isNumber := spec["replicas"].(float64); isNumber {
			data["replicas"] = strconv.FormatFloat(replicas, 'f', -1, 64)
		}
	}
	configMap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      configMapName,
			"namespace": configMapNamespace,
			"labels":    map[string]any{"app.kubernetes.io/name": "sample", "app.kubernetes.io/managed-by": managerName},
		},
		"data": data,
	}}
	return []modulemanager.Item{{Object: configMap}}, nil
}
