package provider

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// inferenceExtensionAddon names the cluster add-on that installs the
// InferencePool CRD, for errors that send the user to it.
const inferenceExtensionAddon = "addons.inference_extension"

// matchLabels turns the fleet's label selector into the pool's
// selector.matchLabels: an InferencePool selects by equality only.
func matchLabels(selector string) (map[string]string, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("fleet.selector: %q is not a label selector: %w", selector, err)
	}
	reqs, _ := sel.Requirements()
	out := map[string]string{}
	for _, r := range reqs {
		vals := r.Values().List()
		if (r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals) || len(vals) != 1 {
			return nil, fmt.Errorf("fleet.selector: %q has %q, but an InferencePool selects pods by labels equal to values only (selector.matchLabels); "+
				"in gateway mode give the fleet a selector of key=value pairs (llmd_model_fleet's router_target has one)", selector, r.String())
		}
		out[r.Key()] = vals[0]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fleet.selector: %q selects every pod of the namespace; an InferencePool needs the fleet's pod labels", selector)
	}
	return out, nil
}

// gatewayContradictions are gateway-mode settings that disagree with the
// fleet or with the mode, each naming the attribute and the fix.
func (s routerSettings) gatewayContradictions() diag.Diagnostics {
	var diags diag.Diagnostics
	g := s.Gateway
	if g == nil {
		return diags
	}
	if g.TargetPort != nil && *g.TargetPort != s.Fleet.HTTPPort {
		diags.AddAttributeError(path.Root("gateway").AtName("target_port"), "Gateway pool contradicts the fleet",
			fmt.Sprintf("gateway.target_port = %d, but fleet.http_port = %d: the gateway would send requests to a port where vLLM does not serve. "+
				"Remove gateway.target_port, or change the fleet's vLLM port.", *g.TargetPort, s.Fleet.HTTPPort))
	}
	fleetLabels, err := matchLabels(s.Fleet.Selector)
	if err != nil {
		diags.AddAttributeError(path.Root("fleet").AtName("selector"), "Fleet selector not usable by an InferencePool", err.Error())
	} else if g.Selector != nil && !maps.Equal(g.Selector, fleetLabels) {
		diags.AddAttributeError(path.Root("gateway").AtName("selector"), "Gateway pool contradicts the fleet",
			fmt.Sprintf("gateway.selector = %s, but the fleet's pods carry %s (fleet.selector %q): the pool would send requests to pods "+
				"whose KV events the router does not follow, or miss the fleet's. Remove gateway.selector, or change the fleet.",
				labelList(g.Selector), labelList(fleetLabels), s.Fleet.Selector))
	}
	if s.APIKeyVersion != nil {
		diags.AddAttributeError(path.Root("api_key"), "API key in gateway mode",
			"in gateway mode the router serves no client requests, so it checks no key: authentication is the gateway's job "+
				"(its own policy on the HTTPRoute or listener). Remove api_key and api_key_version, or remove gateway.")
	}
	if s.Service.Type != "ClusterIP" {
		diags.AddAttributeError(path.Root("service").AtName("type"), "Load balancer in gateway mode",
			fmt.Sprintf("service.type = %q: in gateway mode the gateway reaches the router inside the cluster and clients reach the gateway, "+
				"so nothing needs a load balancer. Set service.type = \"ClusterIP\" (or remove service), or remove gateway.", s.Service.Type))
	}
	return diags
}

func labelList(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// inferencePoolName is the inference_pool attribute: the pool's name in
// gateway mode, null in proxy mode (as releases before it left state).
func (s routerSettings) inferencePoolName() types.String {
	if s.Gateway == nil {
		return types.StringNull()
	}
	return types.StringValue(s.Name)
}

// requireInferencePoolCRD refuses gateway mode on a cluster that does not
// serve InferencePool, before anything is applied, naming the add-on.
func requireInferencePoolCRD(c *kube.Client) error {
	served, err := c.Serves(addons.InferencePoolKind)
	if err != nil {
		return err
	}
	if !served {
		return fmt.Errorf("gateway: the cluster does not serve %s, the Gateway API Inference Extension's pool: enable the add-on that installs its CRD on "+
			"llmd_inference_cluster (%s = { enabled = true }, GIE %s), or install that CRD yourself, then apply again",
			addons.InferencePoolKind, inferenceExtensionAddon, addons.GIEVersion)
	}
	return nil
}
