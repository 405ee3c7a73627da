package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// liveDeployment is what a refresh of a resource anchored on a Deployment
// (the fleet's, the router's) starts from: a client for the cluster and the
// Deployment named by the id `<namespace>/<name>`, or nil when it is gone,
// which removes the resource from state.
func liveDeployment(ctx context.Context, conn connection, data *providerData, id string) (*kube.Client, *appsv1.Deployment, error) {
	namespace, name, _ := strings.Cut(id, "/")
	c, err := conn.client(ctx, data)
	if err != nil {
		return nil, nil, err
	}
	dep, err := c.Typed.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		tflog.Warn(ctx, "the Deployment is gone; removing the resource from state", map[string]any{"id": id})
		return c, nil, nil
	}
	return c, dep, err
}

// importedSettings is the settings annotation a Deployment was applied with,
// which an import restores the resource's inputs from.
func importedSettings(dep *appsv1.Deployment, annotation, resourceType string) (string, error) {
	raw, ok := dep.Annotations[annotation]
	if !ok {
		return "", fmt.Errorf("Deployment %s/%s has no %s annotation: it was not made by %s", dep.Namespace, dep.Name, annotation, resourceType)
	}
	return raw, nil
}

// refreshedHash is the rendered_hash a refresh records: the desired objects'
// hash while the live ones match, else "drift: ..." naming each object and
// field that changed behind Terraform's back, so the plan shows the repair.
func refreshedHash(ctx context.Context, c *kube.Client, objs []kube.Object, hash string) (types.String, error) {
	drift, err := c.Drift(ctx, objs)
	if err != nil || len(drift) == 0 {
		return types.StringValue(hash), err
	}
	var what []string
	for _, d := range drift {
		what = append(what, d.String())
	}
	tflog.Warn(ctx, "objects changed behind Terraform's back", map[string]any{"drift": what})
	return types.StringValue("drift: " + strings.Join(what, "; ")), nil
}
