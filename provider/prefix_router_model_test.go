package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// TestPinnedRouterImage: a release pins the router image of its own
// version; a development build pins none (and then requires image).
func TestPinnedRouterImage(t *testing.T) {
	for version, want := range map[string]string{
		"0.3.1": "ghcr.io/llmd-dev/llmd-router:0.3.1", "v0.3.1": "ghcr.io/llmd-dev/llmd-router:0.3.1",
		"dev": "", "test": "", "": "",
	} {
		if got := pinnedRouterImage(version); got != want {
			t.Errorf("pinnedRouterImage(%q) = %q, want %q", version, got, want)
		}
	}
}

func testRouterSettings() routerSettings {
	var s routerSettings
	preset := "llmd"
	s.Name, s.Namespace, s.Image, s.Replicas, s.LogLevel = "router", "llmd", devRouterImage, 2, "info"
	s.Fleet = routerFleet{Namespace: "llmd", Selector: "llmd.dev/fleet=qwen", HTTPPort: 8000, KVEventsPort: 5557, ReplayPort: 5558,
		Topic: "kv@{ip}:{port}@{model}", BlockSize: 64, ServedModel: "Qwen/Qwen2.5-7B-Instruct", ClaimName: "qwen-weights",
		TokenizerPath: "Qwen2.5-7B-Instruct/tokenizer.json", TokenizerConfigPath: "Qwen2.5-7B-Instruct/tokenizer_config.json"}
	s.Scoring.Preset = &preset
	s.Limits.MaxPendingPerPod, s.Limits.MaxQueue, s.Limits.QueueTimeout, s.Limits.DrainTimeout = 2, 1024, "30s", "2m"
	s.Service.Type, s.Service.Internal, s.Service.Port = "ClusterIP", true, 8000
	return s
}

// TestRouterSettingsPlacementAndService: with `cluster` the routers go to
// the system node group, with `kubernetes` anywhere, and a load balancer's
// scheme follows service.internal unless an annotation says otherwise.
func TestRouterSettingsPlacementAndService(t *testing.T) {
	s := testRouterSettings()
	onCluster, err := s.router(context.Background(), connection{cluster: &kubernetesModel{}})
	if err != nil {
		t.Fatal(err)
	}
	if onCluster.NodeSelector["llmd.dev/pool"] != "system" {
		t.Errorf("on an llmd cluster the node selector is %v, want the system node group", onCluster.NodeSelector)
	}
	elsewhere, err := s.router(context.Background(), connection{direct: &directModel{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(elsewhere.NodeSelector) != 0 {
		t.Errorf("on a cluster made elsewhere the node selector is %v, want none", elsewhere.NodeSelector)
	}
	s.Service.Type, s.Service.Internal = "LoadBalancer", false
	if _, err := s.router(context.Background(), connection{}); err == nil {
		t.Error("an internet-facing router without source ranges or an API key is accepted")
	}
	s.Service.SourceRanges = []string{"203.0.113.0/24"}
	lb, err := s.router(context.Background(), connection{})
	if err != nil {
		t.Fatal(err)
	}
	if !lb.Service.InternetFacing() || lb.Service.Internal {
		t.Errorf("service.internal = false gives %+v", lb.Service)
	}
	s.Service.SourceRanges, s.APIKeyVersion = nil, ptr.To("1")
	if lb, err = s.router(context.Background(), connection{}); err != nil || lb.APIKeyVersion != "1" {
		t.Errorf("an internet-facing router with an API key: %v %+v", err, lb)
	}
	s.Limits.DrainTimeout = "soon"
	if _, err := s.router(context.Background(), connection{}); err == nil {
		t.Error("an unreadable drain_timeout is accepted")
	}
}

// TestRouterScoringPresets: each preset the schema accepts renders its
// mix, and the schema's default preset is the router's own default, so a
// router the provider deploys scores as an unconfigured llmd-router does.
func TestRouterScoringPresets(t *testing.T) {
	s := testRouterSettings()
	for preset, want := range map[string][]config.Scorer{"cost-aware": config.DefaultScorers(), "llmd": config.LLMDScorers()} {
		s.Scoring.Preset = &preset
		r, err := s.router(context.Background(), connection{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Scorers, want) {
			t.Errorf("preset %q renders %+v, want %+v", preset, r.Scorers, want)
		}
	}
	var resp defaults.ObjectResponse
	routerScoringAttribute().Default.DefaultObject(context.Background(), defaults.ObjectRequest{}, &resp)
	if got, ok := resp.PlanValue.Attributes()["preset"].(types.String); !ok || got.ValueString() != "cost-aware" {
		t.Errorf("the schema's default preset is %v, want cost-aware (the router's default)", resp.PlanValue.Attributes()["preset"])
	}
}

// TestRouterBoundsDefaultsAndImport: the KV bound is on by default (a
// reserve of 1,024 output tokens, a headroom of 0.1) and so is the prefill
// bound (2,048 tokens, a quarter of the pods held open), and a router
// imported from a settings annotation written before them restores them
// off, with serve's headroom, as that router ran.
func TestRouterBoundsDefaultsAndImport(t *testing.T) {
	var resp defaults.ObjectResponse
	routerLimitsAttribute().Default.DefaultObject(context.Background(), defaults.ObjectRequest{}, &resp)
	attrs := resp.PlanValue.Attributes()
	if !attrs["kv_output_reserve"].Equal(types.Int64Value(1024)) || !attrs["kv_headroom"].Equal(types.Float64Value(0.1)) ||
		!attrs["max_pending_prefill_per_pod"].Equal(types.Int64Value(2048)) || !attrs["prefill_reserve"].Equal(types.Float64Value(0.25)) {
		t.Errorf("default limits %v", attrs)
	}
	old := testRouterSettings()
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	_ = json.Unmarshal(raw, &fields)
	limits := fields["limits"].(map[string]any)
	delete(limits, "kv_output_reserve")
	delete(limits, "kv_headroom")
	delete(limits, "max_pending_prefill_per_pod")
	delete(limits, "prefill_reserve")
	raw, _ = json.Marshal(fields)
	var m prefixRouterModel
	if d := m.restore(context.Background(), string(raw)); d.HasError() {
		t.Fatal(d)
	}
	got := m.Limits.Attributes()
	if !got["kv_output_reserve"].Equal(types.Int64Value(0)) || !got["kv_headroom"].Equal(types.Float64Value(0.1)) ||
		!got["max_pending_prefill_per_pod"].Equal(types.Int64Value(0)) || !got["prefill_reserve"].Equal(types.Float64Value(0)) {
		t.Errorf("imported limits %v, want the KV bound off with headroom 0.1 and the prefill bound off", got)
	}
}

// TestRouterFleetIsRouterTarget: `fleet` takes llmd_model_fleet's
// router_target as is, so both have exactly the same attribute names.
func TestRouterFleetIsRouterTarget(t *testing.T) {
	fleet := routerFleetAttribute().Attributes
	for name := range routerTargetTypes {
		if _, ok := fleet[name]; !ok {
			t.Errorf("router_target.%s has no fleet.%s", name, name)
		}
	}
	if len(fleet) != len(routerTargetTypes) {
		t.Errorf("fleet has %d attributes, router_target %d", len(fleet), len(routerTargetTypes))
	}
}

// TestRouterCapacityFromFleet: each pod's capacity is the fleet's
// max_num_seqs unless limits.max_in_flight_per_pod sets one (0: no cap),
// and a hand-made fleet that reports none has no cap.
func TestRouterCapacityFromFleet(t *testing.T) {
	s := testRouterSettings()
	for _, tc := range []struct {
		fleet, limit *int64
		want         int
	}{{ptr.To[int64](256), nil, 256}, {ptr.To[int64](256), ptr.To[int64](32), 32}, {ptr.To[int64](256), ptr.To[int64](0), 0}, {nil, nil, 0}} {
		s.Fleet.MaxNumSeqs, s.Limits.MaxInFlightPerPod = tc.fleet, tc.limit
		r, err := s.router(context.Background(), connection{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Limits.MaxInFlightPerPod != tc.want || flagValue(r.Args(), "--max-in-flight-per-pod") != fmt.Sprint(tc.want) {
			t.Errorf("fleet %v, limit %v: capacity %d (args %q), want %d", tc.fleet, tc.limit, r.Limits.MaxInFlightPerPod, r.Args(), tc.want)
		}
	}
}

// TestRouterFlowSettings: classes with their TTLs, the default class, the
// share and the keys (digests lower-cased) reach the workloads spec, and a
// key's class that is no class is an error naming it.
func TestRouterFlowSettings(t *testing.T) {
	s := testRouterSettings()
	s.Limits.Classes = []routerClass{{Name: "gold", TTL: ptr.To("60s")}, {Name: "bronze"}}
	s.Limits.DefaultClass, s.Limits.TenantShare = ptr.To("bronze"), ptr.To(0.25)
	s.Limits.MaxPendingPrefill, s.Limits.PrefillReserve = 2048, 0.25
	digest := strings.Repeat("AB", 32)
	s.APIKeys = []routerAPIKey{{SHA256: digest, Tenant: ptr.To("acme"), Class: ptr.To("gold")}}
	r, err := s.router(context.Background(), connection{})
	if err != nil {
		t.Fatal(err)
	}
	want := workloads.RouterLimits{Classes: []workloads.RouterClass{{Name: "gold", TTL: time.Minute}, {Name: "bronze"}}, DefaultClass: "bronze", TenantShare: 0.25}
	if !reflect.DeepEqual(r.Limits.Classes, want.Classes) || r.Limits.DefaultClass != want.DefaultClass || r.Limits.TenantShare != want.TenantShare {
		t.Errorf("limits %+v", r.Limits)
	}
	if len(r.APIKeys) != 1 || r.APIKeys[0] != (workloads.RouterAPIKey{SHA256: strings.ToLower(digest), Tenant: "acme", Class: "gold"}) {
		t.Errorf("keys %+v", r.APIKeys)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	if args := strings.Join(r.Args(), " "); r.Limits.MaxPendingPrefillPerPod != 2048 || r.Limits.PrefillReserve != 0.25 ||
		!strings.Contains(args, "--max-pending-prefill-per-pod 2048 --prefill-reserve 0.25") {
		t.Errorf("max_pending_prefill_per_pod 2048, prefill_reserve 0.25 render %+v, %q", r.Limits, args)
	}
	if r.Limits.KVOutputReserve != 0 || slices.Contains(r.Args(), "--kv-output-reserve") {
		t.Errorf("kv_output_reserve 0 (off) renders %d, %q", r.Limits.KVOutputReserve, r.Args())
	}
	s.Limits.KVOutputReserve, s.Limits.KVHeadroom = 512, 0.2
	if r, _ = s.router(context.Background(), connection{}); flagValue(r.Args(), "--kv-output-reserve") != "512" || flagValue(r.Args(), "--kv-headroom") != "0.2" {
		t.Errorf("the KV bound renders %q", r.Args())
	}
	s.APIKeys[0].Class = ptr.To("standard")
	if r, _ = s.router(context.Background(), connection{}); r.Validate() == nil || !strings.Contains(r.Validate().Error(), "api_keys[0].class") {
		t.Errorf("a key of class standard among gold, bronze: %v", r.Validate())
	}
}
