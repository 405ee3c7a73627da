package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

const inferencePoolCRDName = "inferencepools.inference.networking.k8s.io"

// deleteInferencePoolCRD removes GIE's CRD from the package's shared
// control plane and waits until it is gone (a CRD is deleted after its
// objects): the add-on never deletes it, and tests expect a cluster
// without it, or one where their own cluster installs it.
func deleteInferencePoolCRD(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Error(err)
		return
	}
	ctx, crds := context.Background(), dyn.Resource(crdGVR)
	if err := crds.Delete(ctx, inferencePoolCRDName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the InferencePool CRD: %v", err)
		return
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := crds.Get(ctx, inferencePoolCRDName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the InferencePool CRD is still there a minute after its deletion (%v)", err)
			return
		}
	}
}

// TestAccInferenceClusterInferenceExtension: the add-on installs GIE's
// InferencePool CRD on the cluster's API server (here the local control
// plane behind the AWS stand-in) and reports it applied with its version;
// the next plan is empty; the CRD deleted behind Terraform's back shows in
// the plan and the apply puts it back; turned off, the CRD stays (deleting
// it would delete every pool) and the status is null.
func TestAccInferenceClusterInferenceExtension(t *testing.T) {
	g := newInClusterGround(t, "gie", 1, 0)
	const name = "acc-gie"
	on := g.config(name, `  addons = { `+inClusterOff+`, inference_extension = {} }`, "")
	off := g.config(name, `  addons = { `+inClusterOff+`, inference_extension = { enabled = false } }`, "")
	ie := tfjsonpath.New("addons").AtMapKey("inference_extension")
	dyn, err := dynamic.NewForConfig(g.c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { deleteInferencePoolCRD(t, g.c) })
	kc, err := kube.NewClient(g.c.RESTConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	crdServed := func(*terraform.State) error {
		served, err := kc.Serves(addons.InferencePoolKind)
		if err != nil || !served {
			return fmt.Errorf("InferencePool served: %v %v", served, err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, g.aws, name),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					if _, err := dyn.Resource(crdGVR).Get(ctx, inferencePoolCRDName, metav1.GetOptions{}); err == nil {
						t.Fatal("the CRD is there before the add-on")
					}
				},
				Config: on,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, ie.AtMapKey("status"), knownvalue.StringExact("applied")),
					statecheck.ExpectKnownValue(clusterRes, ie.AtMapKey("version"), knownvalue.StringExact(addons.GIEVersion)),
					// Never in the inventory: nothing prunes or destroys it.
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("in_cluster_inventory"), knownvalue.ListExact(nil)),
				},
				Check: crdServed,
			},
			{Config: on, PlanOnly: true},
			{
				PreConfig: func() {
					if err := dyn.Resource(crdGVR).Delete(ctx, inferencePoolCRDName, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: on,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(clusterRes, ie.AtMapKey("status")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterRes, ie.AtMapKey("status"), knownvalue.StringExact("applied"))},
				Check:             crdServed,
			},
			{
				Config:            off,
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterRes, ie.AtMapKey("status"), knownvalue.Null())},
				Check:             crdServed,
			},
		},
	})
}
