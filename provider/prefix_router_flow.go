package provider

import (
	"fmt"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// maxInFlightPerPod is each pod's capacity: limits.max_in_flight_per_pod,
// else the fleet's max_num_seqs, else (a fleet that reports none) 0, no cap.
func (s routerSettings) maxInFlightPerPod() int64 {
	switch {
	case s.Limits.MaxInFlightPerPod != nil:
		return *s.Limits.MaxInFlightPerPod
	case s.Fleet.MaxNumSeqs != nil:
		return *s.Fleet.MaxNumSeqs
	}
	return 0
}

// flow sets r's priority classes, default class, tenant share and API keys
// from the settings; the workloads spec validates them against each other.
func (s routerSettings) flow(r *workloads.Router) error {
	l := s.Limits
	for i, c := range l.Classes {
		rc := workloads.RouterClass{Name: c.Name}
		if c.TTL != nil {
			d, err := time.ParseDuration(*c.TTL)
			if err != nil || d <= 0 {
				return fmt.Errorf("limits.priority_classes[%d].ttl: %q is not a positive duration such as 60s", i, *c.TTL)
			}
			rc.TTL = d
		}
		r.Limits.Classes = append(r.Limits.Classes, rc)
	}
	if l.DefaultClass != nil {
		r.Limits.DefaultClass = *l.DefaultClass
	}
	if l.TenantShare != nil {
		r.Limits.TenantShare = *l.TenantShare
	}
	for _, k := range s.APIKeys {
		rk := workloads.RouterAPIKey{SHA256: strings.ToLower(k.SHA256)}
		if k.Tenant != nil {
			rk.Tenant = *k.Tenant
		}
		if k.Class != nil {
			rk.Class = *k.Class
		}
		r.APIKeys = append(r.APIKeys, rk)
	}
	return nil
}
