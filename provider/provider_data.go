package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// providerDataFrom is what Configure hands a resource or data source: nil
// before the provider is configured (validation, some plans), which callers
// treat as "no AWS yet".
func providerDataFrom(pd any, diags *diag.Diagnostics) *providerData {
	if pd == nil {
		return nil
	}
	data, ok := pd.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("got %T, want *providerData: this is a bug in the provider", pd))
	}
	return data
}
