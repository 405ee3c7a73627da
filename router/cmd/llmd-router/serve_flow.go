package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// classesFlag is --priority-classes: the priority classes, highest first,
// each NAME or NAME=TTL (a Go duration; without one the class takes
// --queue-timeout).
type classesFlag []proxy.Class

func (c *classesFlag) String() string {
	if c == nil {
		return ""
	}
	parts := make([]string, len(*c))
	for i, cl := range *c {
		parts[i] = cl.Name
		if cl.TTL > 0 {
			parts[i] += "=" + cl.TTL.String()
		}
	}
	return strings.Join(parts, ",")
}

func (c *classesFlag) Set(v string) error {
	var out classesFlag
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		name, ttl, hasTTL := strings.Cut(strings.TrimSpace(part), "=")
		if name == "" {
			return fmt.Errorf("empty class name in %q: write NAME or NAME=TTL, comma-separated, highest first (e.g. high=60s,standard,low=10s)", v)
		}
		if seen[name] {
			return fmt.Errorf("class %q named twice", name)
		}
		seen[name] = true
		cl := proxy.Class{Name: name}
		if hasTTL {
			d, err := time.ParseDuration(ttl)
			if err != nil || d <= 0 {
				return fmt.Errorf("class %q: TTL %q is not a positive duration such as 30s", name, ttl)
			}
			cl.TTL = d
		}
		out = append(out, cl)
	}
	*c = out
	return nil
}

// loadAPIKeys reads --api-keys-file: one accepted key a line, as the
// SHA-256 of the key in hex (so the file, a mounted Secret, need not hold
// the key itself), then optional tenant=NAME and class=NAME fields; blank
// lines and lines starting with # are skipped. Errors name the file and
// line.
func loadAPIKeys(path string) ([]proxy.APIKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-keys-file: %w", err)
	}
	defer f.Close()
	var keys []proxy.APIKey
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		k, err := parseAPIKeyLine(text)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file %s:%d: %w", path, line, err)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-keys-file %s: %w", path, err)
	}
	return keys, nil
}

// parseAPIKeyLine parses "SHA256-HEX [tenant=NAME] [class=NAME]".
func parseAPIKeyLine(text string) (proxy.APIKey, error) {
	fields := strings.Fields(text)
	var k proxy.APIKey
	sum, err := hex.DecodeString(fields[0])
	if err != nil || len(sum) != len(k.SHA256) {
		return k, fmt.Errorf("the first field must be the key's SHA-256 in 64 hex digits (printf %%s KEY | sha256sum), got %d characters", len(fields[0]))
	}
	copy(k.SHA256[:], sum)
	for _, f := range fields[1:] {
		name, value, _ := strings.Cut(f, "=")
		switch {
		case value == "":
			return k, fmt.Errorf("field %q: write tenant=NAME or class=NAME", f)
		case name == "tenant":
			k.Tenant = value
		case name == "class":
			k.Class = value
		default:
			return k, fmt.Errorf("unknown field %q: only tenant= and class= follow the digest", name)
		}
	}
	return k, nil
}
