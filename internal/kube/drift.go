package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Difference is one desired object whose live state differs in fields llmd
// manages: missing altogether, or with Fields changed behind its back.
type Difference struct {
	Object  Ref
	Missing bool
	// Fields are paths such as "spec.replicas" or
	// "spec.template.spec.containers[0].args" (at most maxDriftFields).
	Fields []string
	// Conflict holds the other managers' claims when an apply without
	// force would be refused.
	Conflict *ConflictError
}

func (d Difference) String() string {
	switch {
	case d.Missing:
		return d.Object.Describe() + " is missing"
	default:
		return d.Object.Describe() + " changed at " + strings.Join(d.Fields, ", ")
	}
}

const maxDriftFields = 8

// Drift compares each desired object with the live one through a server-side
// dry-run apply: the server answers with what an apply would make of the live
// object, so a difference is exactly what llmd's next apply would change.
// Fields other managers own (status, a controller's annotations, defaults)
// never count, and the server's own normalisation (quantities, defaults)
// applies to both sides.
func (c *Client) Drift(ctx context.Context, objs []Object) ([]Difference, error) {
	var out []Difference
	for _, o := range objs {
		d, err := c.driftOf(ctx, o)
		if err != nil {
			return nil, err
		}
		if d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// driftOf compares one object. The live read and the dry run must see the
// same version of the object: a controller writing in between (the
// Deployment controller's revision annotation) would otherwise look like
// drift, so a changed resourceVersion reads both again.
func (c *Client) driftOf(ctx context.Context, o Object) (*Difference, error) {
	ri, err := c.resource(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", o.Describe(), err)
	}
	for attempt := 0; ; attempt++ {
		live, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &Difference{Object: o.Ref, Missing: true}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", o.Describe(), err)
		}
		var conflict *ConflictError
		applied, err := c.applyOne(ctx, o, false, true)
		if errors.As(err, &conflict) {
			// Another manager took fields over: what forcing would change is the drift.
			applied, err = c.applyOne(ctx, o, true, true)
		}
		if err != nil {
			return nil, fmt.Errorf("comparing %s with its desired state: %w", o.Describe(), err)
		}
		if rv, _, _ := unstructured.NestedString(applied, "metadata", "resourceVersion"); rv != live.GetResourceVersion() && attempt < 3 {
			continue
		}
		fields := diffPaths("", comparable(live.Object), comparable(applied), nil)
		if len(fields) == 0 && conflict == nil {
			return nil, nil
		}
		return &Difference{Object: o.Ref, Fields: fields, Conflict: conflict}, nil
	}
}

// comparable drops what changes on every write and is not desired state.
func comparable(obj map[string]any) map[string]any {
	c := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			c[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			switch k {
			case "managedFields", "resourceVersion", "generation":
			default:
				m[k] = v
			}
		}
		c["metadata"] = m
	}
	return c
}

// diffPaths lists the paths at which a and b differ, sorted, at most maxDriftFields.
func diffPaths(prefix string, a, b any, out []string) []string {
	if len(out) >= maxDriftFields || reflect.DeepEqual(a, b) {
		return out
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = diffPaths(p, am[k], bm[k], out)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			out = diffPaths(fmt.Sprintf("%s[%d]", prefix, i), al[i], bl[i], out)
		}
		return out
	}
	return append(out, prefix)
}
