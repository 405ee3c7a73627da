package sim

import (
	"fmt"
	"math"
)

// HPA defaults, from the Kubernetes HorizontalPodAutoscaler (k8s.io/kubernetes
// pkg/controller/podautoscaler and the autoscaling/v2 API's HPAScalingRules;
// "Horizontal Pod Autoscaling", kubernetes.io/docs/tasks/run-application/
// horizontal-pod-autoscale/): the controller reconciles every 15 s
// (--horizontal-pod-autoscaler-sync-period), ignores ratios within 10% of 1
// (--horizontal-pod-autoscaler-tolerance), scales down to the highest
// recommendation of the last 300 s (behavior.scaleDown.stabilizationWindowSeconds)
// and up at once (scaleUp's window is 0), at most doubling the replicas or
// adding 4 pods, whichever is more, per 15 s (scaleUp's default policies).
const (
	HPASyncPeriod      = 15.0
	HPATolerance       = 0.1
	HPAScaleDownWindow = 300.0
	hpaScaleUpPods     = 4
	hpaScaleUpPercent  = 100
)

// HPAConfig is a HorizontalPodAutoscaler on external metrics with
// AverageValue targets, summed over the fleet, per pod: the router's
// demand (requests in flight on the pods plus those waiting in its queue),
// its offered work (WorkWindow), or both, when the controller takes the
// larger proposal (computeReplicasForMetrics).
type HPAConfig struct {
	// Min and Max are minReplicas and maxReplicas (Min >= 1: scale to zero
	// is the HPA's alpha HPAScaleToZero, not modelled here).
	Min, Max int
	// Target, when > 0, is the demand's target average value per pod.
	Target float64
	// WorkTarget, when > 0, is the offered work's target average value per
	// pod, in tokens per second. Unlike the demand it grows when the pods'
	// prefix caches miss (fewer pods hold less of the prefixes), and it does
	// not fall as pods are added (requests in flight are the arrival rate
	// times their latency, which shrinks with the batches), so the HPA's
	// proportional step lands where the load needs instead of swinging. A
	// fleet at its capacity offers what it serves, so the target must stay
	// below what a pod serves for the fleet to scale out of a backlog.
	WorkTarget float64
	// Tolerance, SyncPeriod and ScaleDownWindow default to HPATolerance,
	// HPASyncPeriod and HPAScaleDownWindow when 0.
	Tolerance, SyncPeriod, ScaleDownWindow float64
}

func (c *HPAConfig) defaults() error {
	if c.Min < 1 || c.Max < c.Min || c.Target < 0 || c.WorkTarget < 0 || c.Target+c.WorkTarget == 0 || c.Tolerance < 0 || c.SyncPeriod < 0 || c.ScaleDownWindow < 0 {
		return fmt.Errorf("autoscaler %+v: needs 1 <= min <= max, a demand or work target > 0, tolerance, sync period and window >= 0", *c)
	}
	if c.Tolerance == 0 {
		c.Tolerance = HPATolerance
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = HPASyncPeriod
	}
	if c.ScaleDownWindow == 0 {
		c.ScaleDownWindow = HPAScaleDownWindow
	}
	return nil
}

// HPA is the controller's replica arithmetic for one such autoscaler, one
// reconciliation at a time (Desired).
type HPA struct {
	cfg  HPAConfig
	recs []hpaRec // recommendations of the last ScaleDownWindow
}

type hpaRec struct {
	t float64
	n int
}

// NewHPA returns the autoscaler with cfg's zero fields defaulted.
func NewHPA(cfg HPAConfig) (*HPA, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &HPA{cfg: cfg}, nil
}

// Config is the autoscaler's configuration, defaults applied.
func (h *HPA) Config() HPAConfig { return h.cfg }

// WorkWindow is the offered work's window, in seconds: the work the router
// placed over the last minute, per second.
const WorkWindow = 60.0

// Proposal is the replica count the demand asks for, before stabilisation
// and limits (the replica calculator's GetExternalPerPodMetricReplicas):
// with the usage ratio total / (target x current) within the tolerance of
// 1 the current count, else ceil(total / target), which is
// ceil(current x currentAverage / target).
func (h *HPA) Proposal(current int, total float64) int {
	return h.proposal(current, total, h.cfg.Target)
}

func (h *HPA) proposal(current int, total, target float64) int {
	ratio := total / (target * float64(current))
	if current > 0 && math.Abs(1-ratio) <= h.cfg.Tolerance {
		return current
	}
	return int(math.Ceil(total / target))
}

// Desired is one reconciliation at time now (seconds): current is the
// scale's status.replicas (pods not terminating, started or not), demand
// and work the metrics summed over the fleet (each read only with its
// target). The proposal, the larger of the metrics', is stabilised as the
// controller does (up to the lowest recommendation of the scale-up window,
// 0 s, so the proposal itself; down to the highest of the scale-down
// window), limited to the default scale-up rate, and clamped to
// [Min, Max].
func (h *HPA) Desired(now float64, current int, demand, work float64) int {
	p := 0
	if h.cfg.Target > 0 {
		p = h.Proposal(current, demand)
	}
	if h.cfg.WorkTarget > 0 {
		p = max(p, h.proposal(current, work, h.cfg.WorkTarget))
	}
	down := p
	kept := h.recs[:0]
	for _, r := range h.recs {
		if r.t > now-h.cfg.ScaleDownWindow {
			down = max(down, r.n)
			kept = append(kept, r)
		}
	}
	h.recs = append(kept, hpaRec{t: now, n: p})
	want := current
	if p > want {
		want = p
	}
	if down < want {
		want = down
	}
	if want > current {
		want = min(want, max(current*(100+hpaScaleUpPercent)/100, current+hpaScaleUpPods))
	}
	return min(max(want, h.cfg.Min), h.cfg.Max)
}
