package workloads

import (
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// validateFlow checks the priority classes, the default class, the tenant
// share, the KV bound and the API keys, naming the attribute at fault.
func (r Router) validateFlow() error {
	l := r.Limits
	names := make([]string, 0, len(l.Classes))
	for i, c := range l.Classes {
		switch {
		case !isFlowName(c.Name):
			return fmt.Errorf("limits.priority_classes[%d].name: %q must be 1-63 letters, digits, '-', '_' or '.'", i, c.Name)
		case slices.Contains(names, c.Name):
			return fmt.Errorf("limits.priority_classes[%d].name: %q is named twice", i, c.Name)
		case c.TTL < 0:
			return fmt.Errorf("limits.priority_classes[%d].ttl: %s is negative", i, c.TTL)
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		names = config.DefaultPriorityClasses
	}
	known := func(name string) bool { return slices.Contains(names, name) }
	if l.DefaultClass != "" && !known(l.DefaultClass) {
		return fmt.Errorf("limits.default_class: %q is not one of the classes %s", l.DefaultClass, strings.Join(names, ", "))
	}
	if l.TenantShare < 0 || l.TenantShare > 1 {
		return fmt.Errorf("limits.tenant_share: %g is not in (0, 1]", l.TenantShare)
	}
	if l.KVHeadroom < 0 || l.KVHeadroom >= 1 {
		return fmt.Errorf("limits.kv_headroom: %g is not in (0, 1)", l.KVHeadroom)
	}
	if l.MaxPendingPrefillPerPod < 0 {
		return fmt.Errorf("limits.max_pending_prefill_per_pod: %d is negative (0 turns the prefill bound off)", l.MaxPendingPrefillPerPod)
	}
	if l.PrefillReserve < 0 || l.PrefillReserve >= 1 {
		return fmt.Errorf("limits.prefill_reserve: %g is not a share of the pods in [0, 1)", l.PrefillReserve)
	}
	if l.KVOutputReserve < 0 {
		return fmt.Errorf("limits.kv_output_reserve: %d is negative (0 turns the KV bound off)", l.KVOutputReserve)
	}
	seen := map[string]bool{}
	for i, k := range r.APIKeys {
		b, err := hex.DecodeString(k.SHA256)
		switch {
		case err != nil || len(b) != 32:
			return fmt.Errorf("api_keys[%d].sha256: %q is not 64 hex digits: give sha256(key), e.g. sha256(random_password.key.result)", i, k.SHA256)
		case seen[strings.ToLower(k.SHA256)]:
			return fmt.Errorf("api_keys[%d].sha256: the same key is listed twice", i)
		case k.Tenant != "" && !isFlowName(k.Tenant):
			return fmt.Errorf("api_keys[%d].tenant: %q must be 1-63 letters, digits, '-', '_' or '.'", i, k.Tenant)
		case k.Class != "" && !known(k.Class):
			return fmt.Errorf("api_keys[%d].class: %q is not one of the classes %s", i, k.Class, strings.Join(names, ", "))
		}
		seen[strings.ToLower(k.SHA256)] = true
	}
	return nil
}

// isFlowName is a class or tenant name serve's flag and key file accept
// unquoted: no space, comma, '=' or '#'.
func isFlowName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// flowArgs are serve's flow-control flags the limits and the fleet's
// scheduling policy set beyond its defaults.
func (r Router) flowArgs() []string {
	var args []string
	l := r.Limits
	if len(l.Classes) > 0 {
		parts := make([]string, len(l.Classes))
		for i, c := range l.Classes {
			parts[i] = c.Name
			if c.TTL > 0 {
				parts[i] += "=" + c.TTL.String()
			}
		}
		args = append(args, "--priority-classes", strings.Join(parts, ","))
	}
	if l.DefaultClass != "" {
		args = append(args, "--default-class", l.DefaultClass)
	}
	if l.TenantShare > 0 {
		args = append(args, "--tenant-share", strconv.FormatFloat(l.TenantShare, 'g', -1, 64))
	}
	if l.KVOutputReserve > 0 {
		args = append(args, "--kv-output-reserve", strconv.Itoa(l.KVOutputReserve))
		if l.KVHeadroom > 0 {
			args = append(args, "--kv-headroom", strconv.FormatFloat(l.KVHeadroom, 'g', -1, 64))
		}
	}
	if l.MaxPendingPrefillPerPod > 0 {
		args = append(args, "--max-pending-prefill-per-pod", strconv.Itoa(l.MaxPendingPrefillPerPod))
		if l.PrefillReserve > 0 {
			args = append(args, "--prefill-reserve", strconv.FormatFloat(l.PrefillReserve, 'g', -1, 64))
		}
	}
	if len(r.APIKeys) > 0 {
		args = append(args, "--api-keys-file", path.Join(RouterConfigDir, RouterAPIKeysFile))
	}
	if r.Target.SchedulingPolicy == PolicyPriority {
		// The engines order and preempt by the request's priority: set it
		// from the class, so the class reaches them.
		args = append(args, "--engine-priority")
	}
	return args
}

// apiKeysFile is serve's --api-keys-file for APIKeys: one key a line, its
// digest then its tenant and class; empty without keys.
func (r Router) apiKeysFile() string {
	var b strings.Builder
	for _, k := range r.APIKeys {
		b.WriteString(strings.ToLower(k.SHA256))
		if k.Tenant != "" {
			b.WriteString(" tenant=" + k.Tenant)
		}
		if k.Class != "" {
			b.WriteString(" class=" + k.Class)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// configMapData is the router's ConfigMap: the configuration file and,
// with API keys, their digests (not the keys: the ConfigMap, like the
// state, holds nothing that lets anyone in).
func (r Router) configMapData(yaml []byte) map[string]string {
	data := map[string]string{RouterConfigFile: string(yaml)}
	if keys := r.apiKeysFile(); keys != "" {
		data[RouterAPIKeysFile] = keys
	}
	return data
}
