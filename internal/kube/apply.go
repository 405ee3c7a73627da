package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConflictError is an apply refused because another field manager owns
// fields llmd sets (kubectl edit, another controller, another tool).
type ConflictError struct {
	Object Ref
	// Conflicts are the server's words per field: `conflict with "kubectl-edit" using apps/v1` at ".spec.replicas".
	Conflicts []FieldConflict
}

// FieldConflict is one contested field.
type FieldConflict struct {
	Field   string
	Message string
}

func (e *ConflictError) Error() string {
	var parts []string
	for _, c := range e.Conflicts {
		parts = append(parts, fmt.Sprintf("%s (%s)", c.Field, c.Message))
	}
	return fmt.Sprintf("applying %s: fields llmd manages are owned by another field manager: %s", e.Object.Describe(), strings.Join(parts, "; "))
}

// Apply server-side applies the objects in order under the field manager
// llmd. With force, fields another manager owns are taken over; without it,
// such a field is a *ConflictError naming the manager and the field.
func (c *Client) Apply(ctx context.Context, objs []Object, force bool) error {
	for _, o := range objs {
		if _, err := c.applyOne(ctx, o, force, false); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) applyOne(ctx context.Context, o Object, force, dryRun bool) (map[string]any, error) {
	ri, err := c.resource(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", o.Describe(), err)
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := ri.Apply(ctx, o.Name, o.Body(), opts)
	if err != nil {
		if conflicts := fieldConflicts(err); len(conflicts) > 0 {
			return nil, &ConflictError{Object: o.Ref, Conflicts: conflicts}
		}
		return nil, fmt.Errorf("applying %s: %w", o.Describe(), err)
	}
	return out.Object, nil
}

func fieldConflicts(err error) []FieldConflict {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []FieldConflict
	for _, cause := range status.Status().Details.Causes {
		if cause.Type == metav1.CauseTypeFieldManagerConflict {
			out = append(out, FieldConflict{Field: cause.Field, Message: cause.Message})
		}
	}
	return out
}
