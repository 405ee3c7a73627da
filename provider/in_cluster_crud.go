package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// anchoredModel is the state of a resource anchored on a Deployment it
// applies with its other objects (llmd_model_fleet, llmd_prefix_router):
// what their create, update and delete share.
type anchoredModel interface {
	// fields gives the attributes the shared steps read and write.
	fields() anchoredFields
	// imported reports a state an import left: a connection and an id, its
	// inputs still to be restored from the Deployment's settings annotation.
	imported() bool
	// restore sets the inputs from that annotation.
	restore(ctx context.Context, raw string) diag.Diagnostics
}

// anchoredFields points into a model's state.
type anchoredFields struct {
	id, name, namespace, renderedHash *types.String
	cluster, kubernetes               *types.Object
	inventory                         *types.List
	timeouts                          *timeouts.Value
}

// anchoredKind names one such resource in messages, sets its timeouts and
// applies it.
type anchoredKind[M any] struct {
	what  string // "model fleet"
	label string // the label its objects carry, e.g. llmd.dev/fleet
	// Defaults of the timeouts block.
	createTimeout, updateTimeout, deleteTimeout time.Duration
	// apply applies a planned model, pruning what previous (the prior
	// state's inventory) holds beyond it; prior is nil on create. On an error
	// after objects were applied it still returns the state with the new
	// inventory. config is read for write-only attributes.
	apply func(ctx context.Context, plan M, prior *M, previous []kube.Ref, config tfsdk.Config, diags *diag.Diagnostics) (*M, error)
	// annotation is the Deployment's settings annotation, typeName the
	// resource type, for imports.
	annotation, typeName string
	// refresh gives a state's desired objects and hash and sets its computed
	// attributes from the live cluster.
	refresh func(ctx context.Context, c *kube.Client, dep *appsv1.Deployment, state *M) ([]kube.Object, string, error)
	// afterDelete, when set, removes what the resource made outside the
	// cluster (IAM roles, Pod Identity associations) once its objects are gone.
	afterDelete func(ctx context.Context, state *M) error
}

// createAnchored is Create: on an error it records no state, so the next
// apply's create adopts the objects already applied (server-side apply of
// the same names), where tainted state would delete them.
func createAnchored[M any, P interface {
	*M
	anchoredModel
}](ctx context.Context, k anchoredKind[M], req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := P(&plan).fields()
	// Before the apply's waits (staging, rollout).
	resp.Diagnostics.Append(setInClusterIdentity(ctx, resp.Identity, f)...)
	timeout, diags := f.timeouts.Create(ctx, k.createTimeout)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	state, err := k.apply(ctx, plan, nil, nil, req.Config, &resp.Diagnostics)
	if err != nil {
		resp.Diagnostics.AddError("Creating "+k.what+" "+f.namespace.ValueString()+"/"+f.name.ValueString(),
			explain(err)+"\n\nThe objects already applied are kept (labelled "+k.label+"="+f.name.ValueString()+"); apply again to resume.")
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// updateAnchored is Update: on an error it keeps the prior state with every
// object known to exist in its inventory and a rendered_hash that makes the
// next plan apply again.
func updateAnchored[M any, P interface {
	*M
	anchoredModel
}](ctx context.Context, k anchoredKind[M], req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(setInClusterIdentity(ctx, resp.Identity, P(&plan).fields())...)
	timeout, diags := P(&plan).fields().timeouts.Update(ctx, k.updateTimeout)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pf := P(&prior).fields()
	var previous []kube.Ref
	resp.Diagnostics.Append(inventoryRefs(ctx, *pf.inventory, &previous)...)
	state, err := k.apply(ctx, plan, &prior, previous, req.Config, &resp.Diagnostics)
	if err != nil {
		resp.Diagnostics.AddError("Updating "+k.what+" "+P(&plan).fields().id.ValueString(), explain(err))
		*pf.renderedHash = types.StringValue("incomplete: the last apply failed")
		if state != nil {
			*pf.inventory = mergeInventories(*pf.inventory, *P(state).fields().inventory)
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &prior)...)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// deleteAnchored is Delete: the inventory's objects, in dependency order,
// waited until gone.
func deleteAnchored[M any, P interface {
	*M
	anchoredModel
}](ctx context.Context, data *providerData, k anchoredKind[M], req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := P(&state).fields()
	timeout, diags := f.timeouts.Delete(ctx, k.deleteTimeout)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var refs []kube.Ref
	resp.Diagnostics.Append(inventoryRefs(ctx, *f.inventory, &refs)...)
	conn, err := decodeConnection(ctx, *f.cluster, *f.kubernetes)
	if err != nil {
		resp.Diagnostics.AddError("Deleting "+k.what, err.Error())
		return
	}
	c, err := conn.client(ctx, data)
	if err == nil {
		err = c.Delete(ctx, refs)
	}
	if err == nil && k.afterDelete != nil {
		err = k.afterDelete(ctx, &state)
	}
	if err != nil {
		resp.Diagnostics.AddError("Deleting "+k.what+" "+f.id.ValueString(), err.Error())
	}
}

// readAnchored is Read: gone when the Deployment is; an import restores the
// inputs from its settings annotation; rendered_hash turns into "drift: ..."
// when the live objects differ from the desired ones.
func readAnchored[M any, P interface {
	*M
	anchoredModel
}](ctx context.Context, data *providerData, k anchoredKind[M], req resource.ReadRequest, resp *resource.ReadResponse) {
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := P(&state).fields()
	resp.Diagnostics.Append(setInClusterIdentity(ctx, resp.Identity, f)...)
	conn, err := decodeConnection(ctx, *f.cluster, *f.kubernetes)
	if err != nil {
		resp.Diagnostics.AddError("Reading "+k.what, err.Error())
		return
	}
	id := f.id.ValueString()
	c, dep, err := liveDeployment(ctx, conn, data, id)
	if err != nil {
		resp.Diagnostics.AddError("Reading "+k.what+" "+id, err.Error())
		return
	}
	if dep == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	if P(&state).imported() {
		raw, err := importedSettings(dep, k.annotation, k.typeName)
		if err != nil {
			resp.Diagnostics.AddError("Importing "+k.what+" "+id, err.Error())
			return
		}
		resp.Diagnostics.Append(P(&state).restore(ctx, raw)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	objs, hash, err := k.refresh(ctx, c, dep, &state)
	if err == nil {
		*f.renderedHash, err = refreshedHash(ctx, c, objs, hash)
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading "+k.what+" "+id, err.Error())
		return
	}
	if f.inventory.IsNull() {
		*f.inventory = inventoryList(kube.Refs(objs))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
