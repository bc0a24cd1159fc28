// go-manager: the sample module's manager written in Go with controller-runtime, doing what examples/sample-manager
// does in TypeScript. It watches the sample module's ModuleConfigs in KCP and keeps one SyncResource per ModuleConfig
// with the ConfigMap renderSample makes of it. It needs the KCP only, never SKR credentials.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/skr-watcher/skr-watcher/api/go/modulemanager"
	"github.com/skr-watcher/skr-watcher/api/go/v1alpha1"
)

// What a module manager may do in KCP (config/rbac/role.yaml says the same as a Role):
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=moduleconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=moduleconfigs/status,verbs=patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=syncresources,verbs=get;list;watch;create;patch;delete

func main() {
	var namespace, metricsAddress, healthAddress string
	flag.StringVar(&namespace, "namespace", modulemanager.DefaultNamespace, "where the agent keeps ModuleConfigs and SyncResources")
	flag.StringVar(&metricsAddress, "metrics-address", ":8080", "address of /metrics, and of /healthz and /readyz as the TypeScript kit serves them")
	flag.StringVar(&healthAddress, "health-address", "0", "address of controller-runtime's own probe server (0: off)")
	zapOptions := zap.Options{}
	zapOptions.BindFlags(flag.CommandLine)
	// --kubeconfig is registered by controller-runtime's config loader (else $KUBECONFIG, else in-cluster).
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOptions)))
	if err := run(namespace, metricsAddress, healthAddress); err != nil {
		ctrl.Log.Error(err, "go-manager stopped")
		os.Exit(1)
	}
}

func run(namespace, metricsAddress, healthAddress string) error {
	config, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("KCP connection: %w", err)
	}
	mgr, err := newManager(config, namespace, metricsAddress, healthAddress)
	if err != nil {
		return err
	}
	ctrl.Log.Info("go-manager starting", "manager", managerName, "module", moduleName, "namespace", namespace)
	// ctrl.SetupSignalHandler: SIGTERM stops the watches and waits for reconciles in flight.
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager is the whole manager: its cache limited to what it reads, the module manager, and its probes.
func newManager(config *rest.Config, namespace, metricsAddress, healthAddress string) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	// The cache options name the v1alpha1 kinds: the scheme must know them before the manager is made.
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	options := modulemanager.Options{Name: managerName, Module: moduleName, Namespace: namespace, Render: renderSample}
	var ready http.HandlerFunc
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		Cache:  modulemanager.CacheOptions(options),
		Metrics: metricsserver.Options{
			BindAddress: metricsAddress,
			ExtraHandlers: map[string]http.Handler{
				"/healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }),
				"/readyz":  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ready(w, r) }),
			},
		},
		HealthProbeBindAddress: healthAddress,
	})
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	// Ready once the caches of ModuleConfigs and SyncResources have synced.
	ready = func(w http.ResponseWriter, r *http.Request) {
		if err := mgr.GetCache().WaitForCacheSync(r.Context()); !err {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	if err := modulemanager.SetupWithManager(mgr, options); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("ready check: %w", err)
	}
	return mgr, nil
}
