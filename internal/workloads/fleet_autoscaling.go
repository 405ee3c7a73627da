package workloads

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// validate checks the autoscaling settings, naming the attribute at fault.
func (a *Autoscaling) validate() error {
	switch {
	case a.Min < 0:
		return fmt.Errorf("autoscaling.min_replicas must be >= 0, got %d", a.Min)
	case a.Max < 1 || a.Max < a.Min:
		return fmt.Errorf("autoscaling.max_replicas must be at least 1 and autoscaling.min_replicas (%d), got %d", a.Min, a.Max)
	case a.TargetPerPod < 0 || a.TargetWorkPerPod < 0 || a.TargetPerPod+a.TargetWorkPerPod == 0:
		return fmt.Errorf("autoscaling.target_work_per_pod or autoscaling.target_per_pod must be set, each >= 1, got %d and %d", a.TargetWorkPerPod, a.TargetPerPod)
	case a.ScaleDownDelay < 0 || a.ScaleDownDelay.Hours() > 1:
		return fmt.Errorf("autoscaling.scale_down_delay must be between 0s and 1h (the HPA's limit), got %s", a.ScaleDownDelay)
	case a.Min == 0 && a.ScaleToZeroAfter <= 0:
		return fmt.Errorf("autoscaling.scale_to_zero_after must be positive with min_replicas 0, got %s", a.ScaleToZeroAfter)
	}
	return nil
}

// hpaMin is the HPA's own minimum: at least 1, since below it the HPA
// needs the HPAScaleToZero alpha gate; the router takes the fleet from 1 to
// zero and back.
func (a *Autoscaling) hpaMin() int32 { return max(a.Min, 1) }

// autoscaler is the fleet's HorizontalPodAutoscaler on the router's work,
// its demand or both, External metrics the router serves for the fleet's
// pod labels: replicas = ceil(metric / target) for each, the larger.
func (f Fleet) autoscaler(labels map[string]string) any {
	a := f.Autoscaling
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().WithAPIVersion("apps/v1").WithKind("Deployment").WithName(f.Name)).
		WithMinReplicas(a.hpaMin()).WithMaxReplicas(a.Max).
		WithBehavior(autoscalingv2ac.HorizontalPodAutoscalerBehavior().
			WithScaleDown(autoscalingv2ac.HPAScalingRules().WithStabilizationWindowSeconds(int32(a.ScaleDownDelay.Seconds()))))
	for _, m := range []struct {
		name   string
		target int64
	}{{WorkMetric, a.TargetWorkPerPod}, {DemandMetric, a.TargetPerPod}} {
		if m.target == 0 {
			continue
		}
		spec.WithMetrics(autoscalingv2ac.MetricSpec().WithType(autoscalingv2.ExternalMetricSourceType).
			WithExternal(autoscalingv2ac.ExternalMetricSource().
				WithMetric(autoscalingv2ac.MetricIdentifier().WithName(m.name).
					WithSelector(metav1ac.LabelSelector().WithMatchLabels(f.Selector()))).
				WithTarget(autoscalingv2ac.MetricTarget().WithType(autoscalingv2.AverageValueMetricType).
					WithAverageValue(*resource.NewQuantity(m.target, resource.DecimalSI)))))
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(f.Name, f.Namespace).WithLabels(labels).WithSpec(spec)
}
