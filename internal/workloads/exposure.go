package workloads

import (
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// The Service annotations AWS's load balancer controllers read.
//
// EKS runs the in-tree ("legacy") cloud provider's service controller,
// kubernetes/cloud-provider-aws pkg/providers/v1/aws.go: EnsureLoadBalancer
// makes an internal load balancer when AnnotationLBInternal holds anything
// but "false" (and an internet-facing one when it is absent), and a Network
// Load Balancer when AnnotationLBType is "nlb" (isNLB), a Classic ELB
// otherwise; it honours spec.loadBalancerSourceRanges in the nodes' security
// group rules. It leaves a Service with AnnotationLBType "external" to the
// AWS Load Balancer Controller, which reads AnnotationLBScheme instead and
// defaults it to internal (kubernetes-sigs/aws-load-balancer-controller
// docs/guide/service/annotations.md). Both annotations are set, so the
// Service is internal whichever controller takes it.
const (
	AnnotationLBInternal = "service.beta.kubernetes.io/aws-load-balancer-internal"
	AnnotationLBType     = "service.beta.kubernetes.io/aws-load-balancer-type"
	AnnotationLBScheme   = "service.beta.kubernetes.io/aws-load-balancer-scheme"
)

// Exposure is how a Service reaches its clients.
type Exposure struct {
	// Type is ClusterIP or LoadBalancer.
	Type string
	Port int
	// Internal keeps a load balancer inside the VPC; false faces the internet.
	Internal bool
	// SourceRanges restrict a load balancer's clients (CIDRs).
	SourceRanges []string
	// Annotations are the user's; they win over the defaults.
	Annotations map[string]string
}

// annotations are the defaults for the load balancer's scheme and type,
// overlaid with the user's.
func (e Exposure) annotations() map[string]string {
	out := map[string]string{}
	if e.Type == string(corev1.ServiceTypeLoadBalancer) {
		// An NLB: layer 4, so a stream is never cut at an idle timeout of a
		// Classic ELB's HTTP listener, and one load balancer per Service.
		out[AnnotationLBType] = "nlb"
		if e.Internal {
			out[AnnotationLBInternal] = "true"
			out[AnnotationLBScheme] = "internal"
		} else {
			out[AnnotationLBScheme] = "internet-facing"
		}
	}
	maps.Copy(out, e.Annotations)
	return out
}

// InternetFacing reports whether the load balancer the Service's final
// annotations ask for faces the internet, as the controller that takes it
// reads them (see AnnotationLBInternal).
func (e Exposure) InternetFacing() bool {
	if e.Type != string(corev1.ServiceTypeLoadBalancer) {
		return false
	}
	a := e.annotations()
	if a[AnnotationLBType] == "external" {
		return a[AnnotationLBScheme] == "internet-facing"
	}
	v := a[AnnotationLBInternal]
	return v == "" || v == "false"
}

// validate refuses a load balancer open to the whole internet. attr is the
// Terraform attribute (`service`, `baseline_service`); authenticated says
// whether the Service's backend requires a key, and keyHint how to set one
// ("" when it has none).
func (e Exposure) validate(attr string, authenticated bool, keyHint string) error {
	if len(e.SourceRanges) > 0 && e.Type != string(corev1.ServiceTypeLoadBalancer) {
		return fmt.Errorf("%s.load_balancer_source_ranges: only a LoadBalancer service has source ranges; set %s.type = \"LoadBalancer\" or remove them", attr, attr)
	}
	if !e.InternetFacing() || len(e.SourceRanges) > 0 || authenticated {
		return nil
	}
	fix := fmt.Sprintf("set %s.load_balancer_source_ranges to the clients' CIDRs", attr)
	if keyHint != "" {
		fix += ", or " + keyHint
	}
	return fmt.Errorf("%s: an internet-facing load balancer (%s.internal = false, or its annotations) would let anyone on the internet send requests to the GPU fleet; %s, or keep %s.internal = true",
		attr, attr, fix, attr)
}

// service is the Service in front of pods with selector.
func (e Exposure) service(name, namespace string, labels, selector map[string]string) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceType(e.Type)).WithSelector(selector).
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(int32(e.Port)).WithTargetPort(intstr.FromString("http")))
	if len(e.SourceRanges) > 0 {
		ranges := append([]string(nil), e.SourceRanges...)
		sort.Strings(ranges)
		spec = spec.WithLoadBalancerSourceRanges(ranges...)
	}
	svc := corev1ac.Service(name, namespace).WithLabels(labels).WithSpec(spec)
	if a := e.annotations(); len(a) > 0 {
		svc = svc.WithAnnotations(a)
	}
	return svc
}
