package workloads

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// PickerAppProtocol is the appProtocol of the picker's Service port: HTTP/2
// (gRPC) over TLS, as GIE's endpoint picker Services declare it.
const PickerAppProtocol = "http2"

// The picker's gRPC health services the probes ask (router/picker).
const (
	HealthLiveness  = "liveness"
	HealthReadiness = "readiness"
)

// validateGateway checks gateway mode, naming the Terraform attribute.
func (r Router) validateGateway() error {
	g := r.Gateway
	if g == nil {
		return nil
	}
	if r.Namespace != r.Target.Namespace {
		return fmt.Errorf("namespace: %q is not fleet.namespace %q: in gateway mode the InferencePool lives with the fleet's pods (it selects pods in its own namespace) "+
			"and names the router's Service in that namespace; leave namespace unset (the fleet's)", r.Namespace, r.Target.Namespace)
	}
	if r.Service.Type != string(corev1.ServiceTypeClusterIP) {
		return fmt.Errorf("service.type: %q in gateway mode: the gateway reaches the endpoint picker inside the cluster and clients reach the gateway; "+
			"set service.type = \"ClusterIP\" (or remove it)", r.Service.Type)
	}
	if r.APIKeyVersion != "" {
		return fmt.Errorf("api_key: in gateway mode the router serves no client requests, so it checks no key: authentication is the gateway's job; remove api_key and api_key_version")
	}
	if len(r.APIKeys) > 0 {
		return fmt.Errorf("api_keys: in gateway mode the router serves no client requests, so it checks no key: authentication is the gateway's job, " +
			"which passes the tenant and class as the x-llmd-tenant and x-llmd-priority headers; remove api_keys")
	}
	if g.Pool == "" {
		return fmt.Errorf("gateway: the InferencePool needs a name")
	}
	if len(g.MatchLabels) == 0 {
		return fmt.Errorf("fleet.selector: an InferencePool selects pods by labels; the fleet's selector gives none")
	}
	switch g.FailureMode {
	case "FailClose", "FailOpen":
	default:
		return fmt.Errorf("gateway.failure_mode: %q is not FailClose or FailOpen", g.FailureMode)
	}
	for _, p := range []struct {
		port int
		what string
	}{{RouterPort, "the router's HTTP port"}, {PickerHealthPort, "the picker's health port"}, {PeerPort, "the router's peer port"}, {MetricsAPIPort, "the router's metrics API port"}} {
		if g.Port == p.port {
			return fmt.Errorf("gateway.port: %d is %s on the router pods; choose another (default %d)", g.Port, p.what, DefaultPickerPort)
		}
	}
	if g.Port < 1 || g.Port > 65535 {
		return fmt.Errorf("gateway.port: %d is not a port", g.Port)
	}
	return nil
}

// roleRules are what the router may read in the fleet's namespace: its
// pods and, in gateway mode, the InferencePool that chooses them.
func (r Router) roleRules() []*rbacv1ac.PolicyRuleApplyConfiguration {
	rules := []*rbacv1ac.PolicyRuleApplyConfiguration{
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods").WithVerbs("get", "list", "watch")}
	if r.Gateway != nil {
		rules = append(rules, rbacv1ac.PolicyRule().WithAPIGroups(InferencePoolGVK.Group).WithResources("inferencepools").
			WithVerbs("get", "list", "watch"))
	}
	if rule := r.scaleRule(); rule != nil {
		rules = append(rules, rule)
	}
	return rules
}

func (r Router) containerPorts() []*corev1ac.ContainerPortApplyConfiguration {
	ports := []*corev1ac.ContainerPortApplyConfiguration{corev1ac.ContainerPort().WithName("http").WithContainerPort(RouterPort), peerContainerPort()}
	if r.Gateway != nil {
		ports = append(ports, corev1ac.ContainerPort().WithName("grpc-ext-proc").WithContainerPort(int32(r.Gateway.Port)),
			corev1ac.ContainerPort().WithName("grpc-health").WithContainerPort(PickerHealthPort))
	}
	if r.Target.Autoscaled {
		ports = append(ports, corev1ac.ContainerPort().WithName("metrics-api").WithContainerPort(MetricsAPIPort))
	}
	return ports
}

// probe is an HTTP probe on path in proxy mode; in gateway mode a gRPC
// probe of the picker's health service (the kubelet's gRPC probe takes a
// port number, not a name).
func (r Router) probe(httpProbe func(string, int32, int32) *corev1ac.ProbeApplyConfiguration, path, service string, period, failures int32) *corev1ac.ProbeApplyConfiguration {
	if r.Gateway == nil {
		return httpProbe(path, period, failures)
	}
	return corev1ac.Probe().WithGRPC(corev1ac.GRPCAction().WithPort(PickerHealthPort).WithService(service)).
		WithPeriodSeconds(period).WithFailureThreshold(failures).WithTimeoutSeconds(2)
}

// inferencePool is the pool over the fleet's pods whose endpoint picker is
// the router's Service (GIE api/v1 InferencePool).
func (r Router) inferencePool(labels map[string]string) any {
	g := r.Gateway
	match := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(g.MatchLabels)) {
		match[k] = g.MatchLabels[k]
	}
	return map[string]any{
		"apiVersion": InferencePoolGVK.Group + "/" + InferencePoolGVK.Version, "kind": InferencePoolGVK.Kind,
		"metadata": map[string]any{"name": g.Pool, "namespace": r.Target.Namespace, "labels": labels},
		"spec": map[string]any{
			"selector":    map[string]any{"matchLabels": match},
			"targetPorts": []any{map[string]any{"number": int64(r.Target.HTTPPort)}},
			"endpointPickerRef": map[string]any{
				"kind": "Service", "name": r.Name,
				"port":        map[string]any{"number": int64(g.Port)},
				"failureMode": g.FailureMode,
			},
		},
	}
}
