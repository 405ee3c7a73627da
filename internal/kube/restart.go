package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RestartedAtAnnotation is the pod template annotation a restart sets, the
// one `kubectl rollout restart` sets, so kubectl and dashboards show it.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// restartFieldManager owns the annotation: not the resources' manager
// (`llmd`), so their next server-side apply neither removes it nor counts
// it as drift.
const restartFieldManager = "llmd-restart"

// RestartDeployment replaces every pod of a Deployment through its own
// rollout strategy, as `kubectl rollout restart` does: a new pod template
// annotation at, which the Deployment controller rolls out. WaitDeployment
// then waits for the new pods.
func (c *Client) RestartDeployment(ctx context.Context, namespace, name string, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{RestartedAtAnnotation: at.UTC().Format(time.RFC3339)}}}}})
	if err != nil {
		return err
	}
	_, err = c.Typed.AppsV1().Deployments(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: restartFieldManager})
	if err != nil {
		return fmt.Errorf("restarting Deployment %s/%s: %w", namespace, name, err)
	}
	return nil
}
