package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
)

// HandoverManager co-owns a Deployment's replicas while llmd stops applying
// them, so that the field keeps its value: a field its only applier drops
// is removed, and a Deployment's replicas then default to 1 (Kubernetes'
// server-side apply docs, "Transferring ownership").
const HandoverManager = "llmd-replicas-handover"

// HandOverReplicas prepares a Deployment for an autoscaler: when llmd owns
// its spec.replicas, the same value is applied under HandoverManager, so
// the next apply of llmd without replicas leaves them as they are until the
// autoscaler writes them. A Deployment that does not exist yet, or whose
// replicas llmd does not own, is left alone.
func (c *Client) HandOverReplicas(ctx context.Context, namespace, name string) error {
	d, err := c.Typed.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	owned := false
	for _, f := range d.ManagedFields {
		if f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationApply && f.FieldsV1 != nil &&
			strings.Contains(string(f.FieldsV1.Raw), `"f:replicas"`) {
			owned = true
		}
	}
	if !owned || d.Spec.Replicas == nil {
		return nil
	}
	body, err := json.Marshal(appsv1ac.Deployment(name, namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(*d.Spec.Replicas)))
	if err != nil {
		return err
	}
	_, err = c.Typed.AppsV1().Deployments(namespace).Patch(ctx, name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: HandoverManager, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("handing Deployment %s/%s's replicas (%d) over to its autoscaler: %w", namespace, name, *d.Spec.Replicas, err)
	}
	return nil
}
