package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleteRank orders deletion: what runs pods first (so nothing restarts
// them), then what routes to or watches them, then RBAC, then storage
// (a claim is released once no pod mounts it), and the namespace last.
func deleteRank(kind string) int {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "Job":
		return 0
	case "Service", "PodDisruptionBudget", "PodMonitor", "ServiceMonitor", "ConfigMap", "Secret", "RoleBinding", "ClusterRoleBinding":
		return 1
	case "Role", "ClusterRole", "ServiceAccount":
		return 2
	case "PersistentVolumeClaim":
		return 3
	case "PersistentVolume":
		return 4
	case "Namespace":
		return 6
	}
	return 5
}

// Refs lists the objects' references, the inventory a state keeps.
func Refs(objs []Object) []Ref {
	out := make([]Ref, len(objs))
	for i, o := range objs {
		out[i] = o.Ref
	}
	return out
}

// Prune deletes what the previous inventory holds and the desired objects
// no longer do, waiting until it is gone. A changed apiVersion of the same
// object is not a removal.
func (c *Client) Prune(ctx context.Context, previous []Ref, desired []Object) error {
	keep := map[Ref]bool{}
	for _, o := range desired {
		r := o.Ref
		r.Version = ""
		keep[r] = true
	}
	var gone []Ref
	for _, r := range previous {
		k := r
		k.Version = ""
		if !keep[k] {
			gone = append(gone, r)
		}
	}
	return c.Delete(ctx, gone)
}

// Delete removes the objects in dependency order (deleteRank), each rank
// waited until gone before the next. Workloads are deleted in the
// foreground, so their pods are gone too. A namespace is deleted only when
// nothing but what this call deleted lived in it: another fleet or a user's
// objects keep it. Objects already gone are fine.
func (c *Client) Delete(ctx context.Context, refs []Ref) error {
	refs = slices.Clone(refs)
	slices.SortStableFunc(refs, func(a, b Ref) int { return deleteRank(a.Kind) - deleteRank(b.Kind) })
	for len(refs) > 0 {
		rank := deleteRank(refs[0].Kind)
		n := 1
		for n < len(refs) && deleteRank(refs[n].Kind) == rank {
			n++
		}
		batch := refs[:n]
		refs = refs[n:]
		var waiting []Ref
		for _, r := range batch {
			if r.Kind == "Namespace" {
				if others, err := c.namespaceHolds(ctx, r.Name); err != nil {
					return err
				} else if others != "" {
					c.logf(ctx, "keeping namespace "+r.Name+": it holds objects llmd did not make here", map[string]any{"objects": others})
					continue
				}
			}
			deleted, err := c.deleteOne(ctx, r)
			if err != nil {
				return err
			}
			if deleted {
				waiting = append(waiting, r)
			}
		}
		if err := c.waitGone(ctx, waiting); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) deleteOne(ctx context.Context, r Ref) (bool, error) {
	ri, err := c.resource(r)
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "no matches for kind") {
			return false, nil // its CRD is gone, and the object with it
		}
		return false, fmt.Errorf("deleting %s: %w", r.Describe(), err)
	}
	policy := metav1.DeletePropagationBackground
	if deleteRank(r.Kind) == 0 {
		policy = metav1.DeletePropagationForeground
	}
	err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", r.Describe(), err)
	}
	return true, nil
}

// waitGone polls until every object is gone, logging what still exists.
func (c *Client) waitGone(ctx context.Context, refs []Ref) error {
	began, lastLog := time.Now(), time.Now()
	for len(refs) > 0 {
		var left []Ref
		for _, r := range refs {
			ri, err := c.resource(r)
			if err != nil {
				return fmt.Errorf("waiting for %s to go: %w", r.Describe(), err)
			}
			_, err = ri.Get(ctx, r.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("waiting for %s to go: %w", r.Describe(), err)
			default:
				left = append(left, r)
			}
		}
		refs = left
		if len(refs) == 0 {
			return nil
		}
		if time.Since(lastLog) >= c.Progress {
			lastLog = time.Now()
			c.logf(ctx, "waiting for deleted objects to go", map[string]any{"left": describeAll(refs), "elapsed": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting %s for %s to be deleted: %w", time.Since(began).Round(time.Second), describeAll(refs), context.Cause(ctx))
		case <-time.After(c.Poll):
		}
	}
	return nil
}

func describeAll(refs []Ref) string {
	var s []string
	for _, r := range refs {
		s = append(s, r.Describe())
	}
	return strings.Join(s, ", ")
}

// namespaceHolds names what still lives in a namespace (beyond what every
// namespace has), or "" when it is empty of workloads, services and claims.
func (c *Client) namespaceHolds(ctx context.Context, ns string) (string, error) {
	var held []string
	for _, kind := range []Ref{{Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "Service"},
		{Version: "v1", Kind: "PersistentVolumeClaim"}, {Group: "apps", Version: "v1", Kind: "Deployment"}} {
		kind.Namespace = ns
		ri, err := c.resource(kind)
		if err != nil {
			return "", err
		}
		list, err := ri.List(ctx, metav1.ListOptions{Limit: 5})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("listing %ss in namespace %s: %w", kind.Kind, ns, err)
		}
		for _, item := range list.Items {
			held = append(held, kind.Kind+" "+item.GetName())
		}
	}
	return strings.Join(held, ", "), nil
}
