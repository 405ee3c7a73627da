package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// These tests speak the plugin protocol to the provider as Terraform 1.12+
// does for identity (GetResourceIdentitySchemas, ImportResourceState with an
// identity), with no Terraform and no AWS: they cover the schemas and what
// an import makes of an id or an identity up to the first AWS call.
// TestAccTerraformNative covers the rest (identity set by create and refresh, kept,
// import by identity end to end) on a real Terraform.

// protocolServer is the provider served in process, configured for region
// us-west-2 (configuring calls no AWS API).
func protocolServer(t *testing.T) tfprotov6.ProviderServer {
	t.Helper()
	return protocolServerAt(t, "")
}

func failOnDiagnostics(t *testing.T, diags []*tfprotov6.Diagnostic) {
	t.Helper()
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			t.Fatalf("%s: %s", d.Summary, d.Detail)
		}
	}
}

// identityValue is an identity of the given resource type from string
// attributes, the others null.
func identityValue(t *testing.T, srv tfprotov6.ProviderServer, typeName string, attrs map[string]string) *tfprotov6.ResourceIdentityData {
	t.Helper()
	schemas, err := srv.GetResourceIdentitySchemas(context.Background(), &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ := schemas.IdentitySchemas[typeName].ValueType().(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(tftypes.String, nil)
		if v, ok := attrs[name]; ok {
			vals[name] = tftypes.NewValue(tftypes.String, v)
		}
	}
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, vals))
	if err != nil {
		t.Fatal(err)
	}
	return &tfprotov6.ResourceIdentityData{IdentityData: &dv}
}

func TestIdentitySchemas(t *testing.T) {
	srv := protocolServer(t)
	resp, err := srv.GetResourceIdentitySchemas(context.Background(), &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	failOnDiagnostics(t, resp.Diagnostics)
	want := map[string]map[string]string{
		"llmd_inference_cluster": {"region": "optional", "name": "required"},
		"llmd_model_fleet":       {"cluster_region": "optional", "cluster_name": "required", "namespace": "required", "name": "required"},
		"llmd_prefix_router":     {"cluster_region": "optional", "cluster_name": "required", "namespace": "required", "name": "required"},
	}
	for typeName, attrs := range want {
		s := resp.IdentitySchemas[typeName]
		if s == nil {
			t.Errorf("%s has no identity schema", typeName)
			continue
		}
		got := map[string]string{}
		for _, a := range s.IdentityAttributes {
			got[a.Name] = map[bool]string{true: "required", false: "optional"}[a.RequiredForImport]
			if !a.Type.Is(tftypes.String) || a.RequiredForImport == a.OptionalForImport || a.Description == "" {
				t.Errorf("%s.%s: type %v, required %v, optional %v, description %q", typeName, a.Name, a.Type, a.RequiredForImport, a.OptionalForImport, a.Description)
			}
		}
		if len(got) != len(attrs) {
			t.Errorf("%s identity attributes %v, want %v", typeName, got, attrs)
		}
		for name, kind := range attrs {
			if got[name] != kind {
				t.Errorf("%s.%s is %q for import, want %q", typeName, name, got[name], kind)
			}
		}
	}
}

// An import by id and one by identity give the cluster the same identity,
// its region the provider's.
func TestImportClusterIdentity(t *testing.T) {
	srv := protocolServer(t)
	ctx := context.Background()
	for name, req := range map[string]*tfprotov6.ImportResourceStateRequest{
		"id":       {TypeName: "llmd_inference_cluster", ID: "prod"},
		"identity": {TypeName: "llmd_inference_cluster", Identity: identityValue(t, srv, "llmd_inference_cluster", map[string]string{"name": "prod"})},
		"identity with the provider's region": {TypeName: "llmd_inference_cluster",
			Identity: identityValue(t, srv, "llmd_inference_cluster", map[string]string{"name": "prod", "region": "us-west-2"})},
	} {
		resp, err := srv.ImportResourceState(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		failOnDiagnostics(t, resp.Diagnostics)
		if len(resp.ImportedResources) != 1 || resp.ImportedResources[0].Identity == nil {
			t.Fatalf("by %s: imported %+v, want one resource with an identity", name, resp.ImportedResources)
		}
		schemas, _ := srv.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
		typ := schemas.IdentitySchemas["llmd_inference_cluster"].ValueType()
		v, err := resp.ImportedResources[0].Identity.IdentityData.Unmarshal(typ)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]tftypes.Value
		if err := v.As(&got); err != nil {
			t.Fatal(err)
		}
		var region, cluster string
		_ = got["region"].As(&region)
		_ = got["name"].As(&cluster)
		if region != "us-west-2" || cluster != "prod" {
			t.Errorf("by %s: identity %v, want region us-west-2, name prod", name, v)
		}
	}
}

// An identity naming another region than the provider's is refused before
// any AWS call: the provider's clients look in their own region only.
func TestImportIdentityOtherRegion(t *testing.T) {
	srv := protocolServer(t)
	for typeName, attrs := range map[string]map[string]string{
		"llmd_inference_cluster": {"name": "prod", "region": "eu-west-1"},
		"llmd_model_fleet":       {"cluster_name": "prod", "cluster_region": "eu-west-1", "namespace": "llmd", "name": "qwen"},
		"llmd_prefix_router":     {"cluster_name": "prod", "cluster_region": "eu-west-1", "namespace": "llmd", "name": "router"},
	} {
		resp, err := srv.ImportResourceState(context.Background(), &tfprotov6.ImportResourceStateRequest{
			TypeName: typeName, Identity: identityValue(t, srv, typeName, attrs)})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Diagnostics) != 1 || !strings.Contains(resp.Diagnostics[0].Detail, `region "eu-west-1" is not the provider's ("us-west-2")`) {
			t.Errorf("%s: diagnostics %+v, want one naming both regions", typeName, resp.Diagnostics)
		}
	}
}
