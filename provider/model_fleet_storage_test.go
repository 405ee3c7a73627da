package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// TestAccModelFleetNewFileSystem: a new file system (a new id) is a new
// PersistentVolume and claim, named after it: the apply creates them, the
// pods roll to the new claim and the old pair is pruned, with no
// immutable-field error. A PV's source never changes after creation, so
// when the names did not carry the id the same apply updated the old PV in
// place and the API server refused it.
func TestAccModelFleetNewFileSystem(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	const name, ns = "qwen", "fleet-newfs"
	const fsA, fsB = "fs-0123456789abcdef0", "fs-0fedcba987654321f"
	cfg := func(fs, mount string) string {
		s := directFleetConfig(c, moto, name, ns, "  replicas = 2")
		return strings.NewReplacer(fsA, fs, `"abcdefgh"`, `"`+mount+`"`).Replace(s)
	}
	ctx := context.Background()
	// servedFrom checks that the claim the fleet reports, its volume and
	// the pods are fs's (whatever their names).
	servedFrom := func(s *terraform.State, fs, mount string) error {
		claim := s.RootModule().Resources[fleetRes].Primary.Attributes["router_target.claim_name"]
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != fs || pv.Spec.CSI.VolumeAttributes["mountname"] != mount || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != claim {
			return fmt.Errorf("volume %s: %+v, claim %+v", pv.Name, pv.Spec.CSI, pv.Spec.ClaimRef)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/fleet=" + name + ",app.kubernetes.io/component=decode"})
		if err != nil {
			return err
		}
		serving := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			serving++
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != claim {
					return fmt.Errorf("pod %s mounts claim %s, want %s", p.Name, v.PersistentVolumeClaim.ClaimName, claim)
				}
			}
		}
		if serving != 2 {
			return fmt.Errorf("%d pods serve, want 2", serving)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: cfg(fsA, "abcdefgh"),
				Check:  func(s *terraform.State) error { return servedFrom(s, fsA, "abcdefgh") },
			},
			{
				Config:           cfg(fsB, "zyxwvuts"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("claim_name"), knownvalue.StringExact(name+"-weights-"+fsB)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("inventory").AtSliceIndex(1),
						knownvalue.StringExact("core/v1/PersistentVolume/-/"+ns+"-"+name+"-weights-"+fsB)),
				},
				Check: func(s *terraform.State) error {
					if err := servedFrom(s, fsB, "zyxwvuts"); err != nil {
						return err
					}
					// The old pair is pruned: gone, or going once no pod holds it.
					oldVolume := ns + "-" + name + "-weights-" + fsA
					if inv := inventoryOf(s, fleetRes); strings.Contains(strings.Join(inv, " "), fsA) {
						return fmt.Errorf("inventory %v still holds %s's objects", inv, fsA)
					}
					pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, oldVolume, metav1.GetOptions{})
					if err == nil && pv.DeletionTimestamp == nil {
						return fmt.Errorf("volume %s of the old file system is not pruned", oldVolume)
					} else if err != nil && !apierrors.IsNotFound(err) {
						return err
					}
					return nil
				},
			},
			{Config: cfg(fsB, "zyxwvuts"), PlanOnly: true},
		},
	})
}

// TestKeepsUnversionedVolume: a fleet whose prior state applied the volume
// under the names of earlier providers keeps them while its file system is
// the same (no new volume, no rollout on a provider upgrade); a new file
// system, or a fleet whose volume already carries its id, gets the id.
func TestKeepsUnversionedVolume(t *testing.T) {
	ctx := context.Background()
	const fs, other = "fs-0123456789abcdef0", "fs-0fedcba987654321f"
	prior := func(fs string, volume string) *modelFleetModel {
		var m modelFleetModel
		if d := m.restore(ctx, `{"name":"qwen","namespace":"llmd","storage":{"file_system_id":"`+fs+`"}}`); d.HasError() {
			t.Fatal(d)
		}
		m.Inventory = inventoryList([]kube.Ref{{Version: "v1", Kind: "Namespace", Name: "llmd"},
			{Version: "v1", Kind: "PersistentVolume", Name: volume}, {Version: "v1", Kind: "PersistentVolumeClaim", Namespace: "llmd", Name: "qwen-weights"}})
		return &m
	}
	for _, c := range []struct {
		what  string
		prior *modelFleetModel
		fs    string
		want  bool
	}{
		{"created by this provider", nil, fs, false},
		{"earlier provider's names, same file system", prior(fs, "llmd-qwen-weights"), fs, true},
		{"earlier provider's names, new file system", prior(fs, "llmd-qwen-weights"), other, false},
		{"names with the id already", prior(fs, "llmd-qwen-weights-"+fs), fs, false},
	} {
		if got := keepsUnversionedVolume(ctx, c.prior, c.fs); got != c.want {
			t.Errorf("%s: keeps the earlier names = %v, want %v", c.what, got, c.want)
		}
	}
}
