package addons

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func validKarpenter() Karpenter {
	return Karpenter{Version: DefaultKarpenterVersion, ClusterName: "c", ClusterEndpoint: "https://api.example", InterruptionQueue: "c-us-west-2-karpenter",
		NodeSelector: map[string]string{"llmd.dev/pool": "system"}, Tolerations: []corev1.Toleration{{Key: "dedicated", Value: "system", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}}}
}

// TestKarpenterValuesReachTheChart renders Karpenter's own chart (the test
// ground's, at testenv.KarpenterVersion) with the values llmd sets and
// reads the controller's Deployment: the cluster, its endpoint and the
// interruption queue reach the container's environment, the service account
// is the one the Pod Identity association names, and the placement keeps
// the chart's own selector and toleration beside the system nodes'.
func TestKarpenterValuesReachTheChart(t *testing.T) {
	k := validKarpenter()
	in := action.NewInstall(&action.Configuration{})
	in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, DefaultKarpenterRelease, DefaultKarpenterNamespace
	in.KubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	rel, err := in.Run(testenv.KarpenterChart(t), k.Values())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name: CLUSTER_NAME\n              value: \"c\"",
		"name: CLUSTER_ENDPOINT\n              value: \"https://api.example\"",
		"name: INTERRUPTION_QUEUE\n              value: \"c-us-west-2-karpenter\"",
		"serviceAccountName: karpenter",
		"llmd.dev/pool: system",
		"kubernetes.io/os: linux",
		"key: CriticalAddonsOnly",
		"key: dedicated",
		"replicas: 2",
	} {
		if !strings.Contains(rel.Manifest, want) {
			t.Errorf("the rendered chart lacks %q", want)
		}
	}
}

func TestKarpenterValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Karpenter)
		want string
	}{
		"no version":     {func(k *Karpenter) { k.Version = "" }, "Version is empty"},
		"version range":  {func(k *Karpenter) { k.Version = "~1.14" }, "not an exact chart version"},
		"no cluster":     {func(k *Karpenter) { k.ClusterName = "" }, "ClusterName is empty"},
		"bad repository": {func(k *Karpenter) { k.Repository = "s3://charts" }, `Repository "s3://charts"`},
		"zero replicas":  {func(k *Karpenter) { k.Replicas = -1 }, "Replicas -1"},
		"bad selector":   {func(k *Karpenter) { k.NodeSelector = map[string]string{"a b": "c"} }, "NodeSelector a b=c"},
		"bad namespace":  {func(k *Karpenter) { k.Namespace = "Kube_System" }, `Namespace "Kube_System"`},
	} {
		t.Run(name, func(t *testing.T) {
			k := validKarpenter()
			tc.edit(&k)
			if err := k.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if err := validKarpenter().Validate(); err != nil {
		t.Errorf("a valid release: %v", err)
	}
}
