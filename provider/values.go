package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// decodeObject fills a plain Go struct (with json tags named as the
// attributes) from a Terraform object, or a slice of them from a list of
// objects: null attributes are left out, so pointer fields tell "unset"
// from a zero value.
func decodeObject(v attr.Value, into any) diag.Diagnostics {
	var diags diag.Diagnostics
	plain, err := plainValue(v)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(plain); err == nil {
			err = json.Unmarshal(b, into)
		}
	}
	if err != nil {
		diags.AddError("Decoding a nested attribute", err.Error()+": this is a bug in the provider")
	}
	return diags
}

func plainValue(v attr.Value) (any, error) {
	if v == nil || v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	switch x := v.(type) {
	case basetypes.StringValue:
		return x.ValueString(), nil
	case basetypes.BoolValue:
		return x.ValueBool(), nil
	case basetypes.Int64Value:
		return x.ValueInt64(), nil
	case basetypes.Float64Value:
		return x.ValueFloat64(), nil
	case basetypes.NumberValue:
		f, _ := x.ValueBigFloat().Float64()
		return f, nil
	case basetypes.ListValue:
		return plainElements(x.Elements())
	case basetypes.SetValue:
		return plainElements(x.Elements())
	case basetypes.MapValue:
		return plainAttributes(x.Elements())
	case basetypes.ObjectValue:
		return plainAttributes(x.Attributes())
	}
	return nil, fmt.Errorf("unsupported value %T", v)
}

func plainElements(elems []attr.Value) (any, error) {
	out := make([]any, 0, len(elems))
	for _, e := range elems {
		p, err := plainValue(e)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func plainAttributes(attrs map[string]attr.Value) (any, error) {
	out := make(map[string]any, len(attrs))
	for k, e := range attrs {
		if e.IsNull() {
			continue
		}
		p, err := plainValue(e)
		if err != nil {
			return nil, err
		}
		out[k] = p
	}
	return out, nil
}

// encodeObject is decodeObject's inverse: a plain Go value (through its JSON
// form) as a Terraform object of the given attribute types; absent keys are null.
func encodeObject(ctx context.Context, from any, attrTypes map[string]attr.Type) (types.Object, diag.Diagnostics) {
	v, diags := encodeValue(from, types.ObjectType{AttrTypes: attrTypes})
	if diags.HasError() {
		return types.ObjectNull(attrTypes), diags
	}
	return v.(types.Object), diags
}

// encodeObjects is encodeObject for a slice: a list of objects of the given
// attribute types, null for a nil slice.
func encodeObjects(from any, attrTypes map[string]attr.Type) (types.List, diag.Diagnostics) {
	t := types.ObjectType{AttrTypes: attrTypes}
	v, diags := encodeValue(from, types.ListType{ElemType: t})
	if diags.HasError() {
		return types.ListNull(t), diags
	}
	return v.(types.List), diags
}

func encodeValue(from any, t attr.Type) (attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	b, err := json.Marshal(from)
	var plain any
	if err == nil {
		err = json.Unmarshal(b, &plain)
	}
	var v attr.Value
	if err == nil {
		v, err = terraformValue(plain, t)
	}
	if err != nil {
		diags.AddError("Encoding a nested attribute", err.Error()+": this is a bug in the provider")
	}
	return v, diags
}

func terraformValue(p any, t attr.Type) (attr.Value, error) {
	switch tt := t.(type) {
	case basetypes.StringType:
		if p == nil {
			return types.StringNull(), nil
		}
		s, ok := p.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, got %T", p)
		}
		return types.StringValue(s), nil
	case basetypes.BoolType:
		if p == nil {
			return types.BoolNull(), nil
		}
		return types.BoolValue(p == true), nil
	case basetypes.Int64Type:
		if p == nil {
			return types.Int64Null(), nil
		}
		f, _ := p.(float64)
		return types.Int64Value(int64(f)), nil
	case basetypes.Float64Type:
		if p == nil {
			return types.Float64Null(), nil
		}
		f, _ := p.(float64)
		return types.Float64Value(f), nil
	case basetypes.NumberType:
		f, _ := p.(float64)
		return types.NumberValue(big.NewFloat(f)), nil
	case basetypes.ListType:
		if p == nil {
			return types.ListNull(tt.ElemType), nil
		}
		items, _ := p.([]any)
		elems := make([]attr.Value, 0, len(items))
		for _, it := range items {
			e, err := terraformValue(it, tt.ElemType)
			if err != nil {
				return nil, err
			}
			elems = append(elems, e)
		}
		v, d := types.ListValue(tt.ElemType, elems)
		if d.HasError() {
			return nil, fmt.Errorf("%v", d)
		}
		return v, nil
	case basetypes.MapType:
		if p == nil {
			return types.MapNull(tt.ElemType), nil
		}
		items, _ := p.(map[string]any)
		elems := make(map[string]attr.Value, len(items))
		for k, it := range items {
			e, err := terraformValue(it, tt.ElemType)
			if err != nil {
				return nil, err
			}
			elems[k] = e
		}
		v, d := types.MapValue(tt.ElemType, elems)
		if d.HasError() {
			return nil, fmt.Errorf("%v", d)
		}
		return v, nil
	case basetypes.ObjectType:
		if p == nil {
			return types.ObjectNull(tt.AttrTypes), nil
		}
		items, _ := p.(map[string]any)
		attrs := make(map[string]attr.Value, len(tt.AttrTypes))
		for k, at := range tt.AttrTypes {
			e, err := terraformValue(items[k], at)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			attrs[k] = e
		}
		v, d := types.ObjectValue(tt.AttrTypes, attrs)
		if d.HasError() {
			return nil, fmt.Errorf("%v", d)
		}
		return v, nil
	}
	return nil, fmt.Errorf("unsupported type %T", t)
}
