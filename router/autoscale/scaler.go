package autoscale

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ScalerConfig configures a Scaler.
type ScalerConfig struct {
	Client     kubernetes.Interface
	Namespace  string
	Deployment string
	// IdleAfter is how long the fleet must have no demand before the
	// Scaler takes it to zero replicas; 0 never does.
	IdleAfter time.Duration
	// Demand is the router's demand on the fleet now (MetricDemand).
	Demand func() int64
	// Every is how often the Scaler samples the demand and reads the
	// fleet's scale (default 1s).
	Every time.Duration
	Log   *slog.Logger
}

// Scaler takes the fleet's Deployment from zero replicas to one when a
// request finds no pod (Wake), and from any to zero once it has had no
// demand for IdleAfter (Run), through the Deployment's scale subresource,
// as the HPA does (the router's Role grants get and update on that one
// Deployment's scale). Between one and the HPA's maximum the HPA decides;
// at zero it stands aside ("ScalingDisabled": the HPA leaves a workload
// scaled to zero alone), which is how zero stays zero until a request
// comes.
type Scaler struct {
	cfg  ScalerConfig
	wake chan struct{}

	mu        sync.Mutex
	idleSince time.Time // zero while there is demand
}

// NewScaler returns a Scaler; Run does its work.
func NewScaler(cfg ScalerConfig) *Scaler {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	return &Scaler{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake asks for the fleet to have a pod: the request calling it found none
// and waits. It never blocks; Run scales the fleet from zero.
func (s *Scaler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run scales the fleet from zero when woken and to zero when idle, until
// ctx ends.
func (s *Scaler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			if err := s.scaleFromZero(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Error("cannot scale the fleet from zero", "deployment", s.cfg.Deployment, "error", err)
			}
		case <-t.C:
			if s.idle(time.Now()) {
				if err := s.scaleToZero(ctx); err != nil && ctx.Err() == nil {
					s.cfg.Log.Error("cannot scale the idle fleet to zero", "deployment", s.cfg.Deployment, "error", err)
				}
			}
		}
	}
}

// idle says whether the fleet has had no demand for IdleAfter at now.
func (s *Scaler) idle(now time.Time) bool {
	if s.cfg.IdleAfter <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Demand() > 0 {
		s.idleSince = time.Time{}
		return false
	}
	if s.idleSince.IsZero() {
		s.idleSince = now
	}
	return now.Sub(s.idleSince) >= s.cfg.IdleAfter
}

// scaleFromZero sets the Deployment's replicas to 1 if they are 0.
func (s *Scaler) scaleFromZero(ctx context.Context) error {
	return s.setScale(ctx, func(n int32) (int32, bool) { return 1, n == 0 }, "a request found no pod")
}

// scaleToZero sets the Deployment's replicas to 0.
func (s *Scaler) scaleToZero(ctx context.Context) error {
	return s.setScale(ctx, func(n int32) (int32, bool) { return 0, n > 0 }, fmt.Sprintf("no demand for %s", s.cfg.IdleAfter))
}

// setScale reads the scale and, where change says so, writes the new
// replicas with the read's resourceVersion, reading again on a conflict
// (the HPA or a peer replica wrote in between).
func (s *Scaler) setScale(ctx context.Context, change func(replicas int32) (int32, bool), why string) error {
	deps := s.cfg.Client.AppsV1().Deployments(s.cfg.Namespace)
	for attempt := 0; ; attempt++ {
		sc, err := deps.GetScale(ctx, s.cfg.Deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		to, ok := change(sc.Spec.Replicas)
		if !ok {
			return nil
		}
		from := sc.Spec.Replicas
		sc.Spec.Replicas = to
		_, err = deps.UpdateScale(ctx, s.cfg.Deployment, &autoscalingv1.Scale{ObjectMeta: sc.ObjectMeta, Spec: sc.Spec}, metav1.UpdateOptions{FieldManager: "llmd-router"})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err == nil {
			s.cfg.Log.Info("scaled the fleet", "deployment", s.cfg.Deployment, "from", from, "to", to, "why", why)
		}
		return err
	}
}
