package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Stacks and unknown inputs (issue 39 item 6), at the protocol level:
// deferral reaches a provider from Stacks, Terraform's alpha builds and
// OpenTofu (which allows it on every request), so these tests send
// PlanResourceChange as such a client does and as Terraform's stable
// releases do. The fleet and router must plan with unknown values either
// way and never defer: OpenTofu 1.11 turns a deferral into an error
// (TestAccMatrix found it), and Stacks need only a clean plan. The provider
// is configured with every AWS endpoint, and the fleets' kubernetes host,
// at a server that counts what reaches it: planning with an unknown cluster
// must call nothing.

// countingServer answers every request 500 and counts them.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		t.Logf("API call while planning: %s %s", r.Method, r.URL)
		http.Error(w, "no call is expected while planning", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// protocolServerAt is the provider served in process, configured for
// region us-west-2 with every AWS endpoint at url (none when url is empty).
func protocolServerAt(t *testing.T, url string) tfprotov6.ProviderServer {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ctx := context.Background()
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ := schema.Provider.ValueType().(tftypes.Object)
	set := map[string]tftypes.Value{"region": tftypes.NewValue(tftypes.String, "us-west-2")}
	if url != "" {
		endpoints := typ.AttributeTypes["endpoints"].(tftypes.Object)
		eps := map[string]tftypes.Value{}
		for name := range endpoints.AttributeTypes {
			eps[name] = tftypes.NewValue(tftypes.String, url)
		}
		set["endpoints"] = tftypes.NewValue(endpoints, eps)
	}
	config := objectValue(t, typ, set)
	resp, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: config})
	if err != nil {
		t.Fatal(err)
	}
	failOnDiagnostics(t, resp.Diagnostics)
	return srv
}

// objectValue is an object of type typ with the given attributes, the
// others null.
func objectValue(t *testing.T, typ tftypes.Object, set map[string]tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
		if v, ok := set[name]; ok {
			vals[name] = v
		}
	}
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, vals))
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// planCreate plans creating typeName from a configuration of the given
// attributes, as a client that allows deferral or not.
func planCreate(t *testing.T, srv tfprotov6.ProviderServer, typeName string, set map[string]tftypes.Value, deferralAllowed bool) *tfprotov6.PlanResourceChangeResponse {
	t.Helper()
	ctx := context.Background()
	schemas, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ := schemas.ResourceSchemas[typeName].ValueType().(tftypes.Object)
	config := objectValue(t, typ, set)
	prior, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typeName, PriorState: &prior,
		ProposedNewState: config, Config: config,
		ClientCapabilities: &tfprotov6.PlanResourceChangeClientCapabilities{DeferralAllowed: deferralAllowed}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// attrType is the type of a resource type's top-level attribute.
func attrType(t *testing.T, srv tfprotov6.ProviderServer, typeName, name string) tftypes.Type {
	t.Helper()
	schemas, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return schemas.ResourceSchemas[typeName].ValueType().(tftypes.Object).AttributeTypes[name]
}

func TestPlanWithUnknownClusterCallsNothing(t *testing.T) {
	api, calls := countingServer(t)
	srv := protocolServerAt(t, api.URL)
	unknown := func(typeName, name string) tftypes.Value {
		return tftypes.NewValue(attrType(t, srv, typeName, name), tftypes.UnknownValue)
	}
	// A cluster made elsewhere whose token another component still has to
	// mint: host known (the counting server), token unknown.
	directType := attrType(t, srv, "llmd_model_fleet", "kubernetes").(tftypes.Object)
	direct := map[string]tftypes.Value{}
	for name, at := range directType.AttributeTypes {
		direct[name] = tftypes.NewValue(at, nil)
	}
	direct["host"] = tftypes.NewValue(tftypes.String, api.URL)
	direct["token"] = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	cases := map[string]struct {
		typeName string
		set      map[string]tftypes.Value
	}{
		"fleet on a cluster to be created": {"llmd_model_fleet", map[string]tftypes.Value{
			"name":    tftypes.NewValue(tftypes.String, "qwen"),
			"cluster": unknown("llmd_model_fleet", "cluster"),
			"storage": unknown("llmd_model_fleet", "storage"),
		}},
		"fleet on a cluster whose token is unknown": {"llmd_model_fleet", map[string]tftypes.Value{
			"name":       tftypes.NewValue(tftypes.String, "qwen"),
			"kubernetes": tftypes.NewValue(directType, direct),
			"storage":    unknown("llmd_model_fleet", "storage"),
		}},
		"router on a cluster to be created": {"llmd_prefix_router", map[string]tftypes.Value{
			"name":    tftypes.NewValue(tftypes.String, "router"),
			"image":   tftypes.NewValue(tftypes.String, devRouterImage),
			"cluster": unknown("llmd_prefix_router", "cluster"),
			"fleet":   unknown("llmd_prefix_router", "fleet"),
		}},
	}
	for name, c := range cases {
		for _, deferralAllowed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, deferral allowed %v", name, deferralAllowed), func(t *testing.T) {
				resp := planCreate(t, srv, c.typeName, c.set, deferralAllowed)
				failOnDiagnostics(t, resp.Diagnostics)
				if resp.Deferred != nil {
					t.Errorf("deferred %+v, want a plan (OpenTofu fails the run on a deferral)", resp.Deferred)
				}
				if resp.PlannedState == nil {
					t.Error("no planned state")
				}
			})
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d API calls while planning with unknown inputs, want none", n)
	}
}

// The counting server does see the provider's calls: a cluster's create
// plan runs its preflight against AWS (quotas, versions) through it.
func TestCountingServerSeesPlanTimeCalls(t *testing.T) {
	api, calls := countingServer(t)
	srv := protocolServerAt(t, api.URL)
	planCreate(t, srv, "llmd_inference_cluster", map[string]tftypes.Value{"name": tftypes.NewValue(tftypes.String, "prod")}, true)
	if calls.Load() == 0 {
		t.Error("no call reached the counting server from a cluster's preflight: the endpoints are not where the provider calls")
	}
}
