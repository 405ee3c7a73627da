package kube

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FieldManager owns every field the provider applies.
const FieldManager = "llmd"

// Ref names one object the provider applied: the inventory keeps these, so
// an update can prune what is no longer desired and a destroy can find what
// to delete even when the configuration that made it is gone.
type Ref struct {
	// Group is the API group, "" for the core group.
	Group string
	// Version is the API version the object was applied with.
	Version   string
	Kind      string
	Namespace string
	Name      string
}

// String is the inventory form: "group/version/Kind/namespace/name", with
// "core" for the core group and "-" for a cluster-scoped object's namespace.
func (r Ref) String() string {
	g, ns := r.Group, r.Namespace
	if g == "" {
		g = "core"
	}
	if ns == "" {
		ns = "-"
	}
	return strings.Join([]string{g, r.Version, r.Kind, ns, r.Name}, "/")
}

// Describe is the form for messages: "Deployment llmd/qwen".
func (r Ref) Describe() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// GroupVersionKind is the object's type.
func (r Ref) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// ParseRef reads the String form back.
func ParseRef(s string) (Ref, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[1] == "" || parts[2] == "" || parts[4] == "" {
		return Ref{}, fmt.Errorf("inventory entry %q: want group/version/Kind/namespace/name", s)
	}
	r := Ref{Group: parts[0], Version: parts[1], Kind: parts[2], Namespace: parts[3], Name: parts[4]}
	if r.Group == "core" {
		r.Group = ""
	}
	if r.Namespace == "-" {
		r.Namespace = ""
	}
	return r, nil
}

// Object is one desired object, ready to apply.
type Object struct {
	Ref
	body *unstructured.Unstructured
}

// FromApplyConfiguration turns a typed client-go apply configuration (or any
// value that marshals to a Kubernetes object with apiVersion, kind and
// metadata.name) into an Object.
func FromApplyConfiguration(ac any) (Object, error) {
	raw, err := json.Marshal(ac)
	if err != nil {
		return Object{}, fmt.Errorf("encoding %T: %w", ac, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return Object{}, fmt.Errorf("decoding %T as an object: %w", ac, err)
	}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" || u.GetName() == "" {
		return Object{}, fmt.Errorf("%T has no apiVersion, kind or metadata.name", ac)
	}
	return Object{Ref: Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}, body: u}, nil
}

// Body is a copy of the object as it is applied.
func (o Object) Body() *unstructured.Unstructured { return o.body.DeepCopy() }

// Into decodes the object into a typed struct (tests and hashing).
func (o Object) Into(out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(o.body.Object, out)
}

// Canonical is the object's JSON with sorted keys: the same desired objects
// always give the same bytes, so a hash of them is a stable plan value.
func (o Object) Canonical() ([]byte, error) {
	// encoding/json sorts map keys, and unstructured content is maps all the way down.
	return json.Marshal(o.body.Object)
}
