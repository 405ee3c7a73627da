package addons

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// GIEVersion is the Gateway API Inference Extension release whose
// InferencePool CRD the provider installs: the file gie/ holds, unchanged
// from config/crd/bases of the module sigs.k8s.io/gateway-api-inference-extension
// at this version (Apache-2.0; a test compares the two).
const GIEVersion = "v1.6.0"

// InferencePoolCRDFile is the CRD's file name in the GIE module (config/crd/bases).
const InferencePoolCRDFile = "inference.networking.k8s.io_inferencepools.yaml"

//go:embed gie/inference.networking.k8s.io_inferencepools.yaml
var inferencePoolCRD []byte

// InferencePoolKind is the type gateway-mode routers apply: the pool their
// gateway routes to.
var InferencePoolKind = schema.GroupVersionKind{Group: "inference.networking.k8s.io", Version: "v1", Kind: "InferencePool"}

// InferencePoolCRD is the pinned InferencePool CustomResourceDefinition as
// an object to apply server-side.
func InferencePoolCRD() (kube.Object, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(inferencePoolCRD, &obj); err != nil {
		return kube.Object{}, fmt.Errorf("reading the embedded InferencePool CRD: %w", err)
	}
	return kube.FromApplyConfiguration(obj)
}

// ApplyInferencePoolCRD applies the InferencePool CRD server-side under the
// field manager llmd (taking over fields an earlier install set, e.g. GIE's
// own manifests at another version) and waits until it is Established and
// listed by discovery, so a router applied next in the same run can create
// its pool. It is never deleted by llmd: deleting a CRD deletes every
// InferencePool of the cluster, the ones other tools made included.
func ApplyInferencePoolCRD(ctx context.Context, kc *kube.Client, timeout time.Duration, logf Logf) error {
	crd, err := InferencePoolCRD()
	if err != nil {
		return err
	}
	if err := kc.Apply(ctx, []kube.Object{crd}, true); err != nil {
		return fmt.Errorf("applying the InferencePool CRD (Gateway API Inference Extension %s): %w", GIEVersion, err)
	}
	logf.printf("applied the InferencePool CRD of the Gateway API Inference Extension %s server-side", GIEVersion)
	deadline := time.Now().Add(timeout)
	if err := waitEstablished(ctx, kc, crd.Name, deadline); err != nil {
		return err
	}
	return waitDiscovered(ctx, kc, crd, deadline)
}
