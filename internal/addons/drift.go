package addons

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/release"
)

// drift lists how the deployed release differs from m, sorted.
func drift(s Status, deployed map[string]any, m chartRelease) []string {
	var out []string
	if s.Chart != m.Chart {
		out = append(out, fmt.Sprintf("chart %s, want %s", s.Chart, m.Chart))
	}
	if s.ChartVersion != m.Version {
		out = append(out, fmt.Sprintf("chart version %s, want %s", s.ChartVersion, m.Version))
	}
	if s.Status != release.StatusDeployed.String() {
		out = append(out, "status "+s.Status)
	}
	out = diffValues("", normalize(deployed), normalize(m.Values), out)
	slices.Sort(out)
	return out
}

// unset stands for a value path that is absent on one side.
type unsetValue struct{}

// diffValues appends "values: path = got, want want" for every leaf where
// the deployed user-supplied values differ from the desired ones; maps are
// compared key by key, anything else (lists included) as a whole.
func diffValues(path string, got, want any, out []string) []string {
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		keys := make([]string, 0, len(gm)+len(wm))
		for k := range gm {
			keys = append(keys, k)
		}
		for k := range wm {
			if _, ok := gm[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			g, ok := gm[k]
			if !ok {
				g = unsetValue{}
			}
			w, ok := wm[k]
			if !ok {
				w = unsetValue{}
			}
			out = diffValues(joinPath(path, k), g, w, out)
		}
		return out
	}
	if reflect.DeepEqual(got, want) {
		return out
	}
	return append(out, fmt.Sprintf("values: %s = %s, want %s", path, showValue(path, got), showValue(path, want)))
}

// joinPath writes a key with dots or brackets (a node label such as
// "llmd.dev/pool") in brackets, so the path reads back unambiguously.
func joinPath(path, key string) string {
	if strings.ContainsAny(key, ".[]\" ") || key == "" {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// sensitiveKey matches value names that usually carry credentials, which
// another actor may have put into the release's values (grafana.adminPassword):
// drift names the path but never prints such a value into a plan or a log.
var sensitiveKey = regexp.MustCompile(`(?i)(password|passwd|token|secret[_-]?key|api[_-]?key|credentials?)"?\]?$`)

func showValue(path string, v any) string {
	switch v := v.(type) {
	case unsetValue:
		return "(unset)"
	case string:
		if sensitiveKey.MatchString(path) {
			return "(sensitive)"
		}
		return v
	}
	if sensitiveKey.MatchString(path) {
		return "(sensitive)"
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
