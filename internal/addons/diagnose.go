package addons

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// notReadyLook is how long each unready Deployment is looked at for its reason.
const notReadyLook = time.Second

// explainNotReady adds to a failed install or upgrade why the release's
// Deployments are not ready, in the scheduler's and kubelet's words
// ("0/3 nodes are available: 3 node(s) didn't match Pod's node
// affinity/selector"): Helm's own error says only that its wait timed out.
// A cancelled apply gets no diagnosis; it asked to stop.
func explainNotReady(ctx context.Context, kc *kube.Client, m chartRelease, err error) error {
	if ctx.Err() != nil {
		return err
	}
	list, lerr := kc.Typed.AppsV1().Deployments(m.Namespace).List(ctx, metav1.ListOptions{})
	if lerr != nil {
		return err
	}
	var why []string
	for _, d := range list.Items {
		// Helm annotates every object of a release with its name.
		if d.Annotations["meta.helm.sh/release-name"] != m.Release {
			continue
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ReadyReplicas >= want && d.Status.UpdatedReplicas >= want {
			continue
		}
		look, cancel := context.WithTimeout(ctx, notReadyLook)
		werr := kc.WaitDeployment(look, d.Namespace, d.Name)
		cancel()
		var rollout *kube.RolloutError
		if errors.As(werr, &rollout) {
			why = append(why, rollout.Error())
		}
	}
	if len(why) == 0 {
		return err
	}
	return fmt.Errorf("%w; not ready: %s", err, strings.Join(why, "; "))
}
