// The AWS Price List Query API (service "pricing"), which moto 5.2.1 does
// not implement. Karpenter reads EC2 On-Demand prices from it to choose the
// cheapest offering (its kwok build refuses to start without them). The
// stand-in answers GetProducts as the API does ("Returns a list of all
// products that match the filter criteria", Price List Query API reference,
// GetProducts): one JSON document per product in PriceList, each with the
// product's attributes and its OnDemand terms, filtered by TERM_MATCH on
// the attributes it holds. The prices are AWS's published On-Demand list
// prices (Linux, shared tenancy) for the types the test ground uses, the
// same in us-east-1 and us-west-2; a type not listed has no product, as a
// type a region does not offer.

package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// onDemandListPrices are USD per instance-hour, Linux, shared tenancy, as
// the EC2 On-Demand pricing page lists them for us-east-1 and us-west-2.
var onDemandListPrices = map[string]string{
	"g5.xlarge": "1.006", "g5.2xlarge": "1.212", "g5.4xlarge": "1.624", "g5.8xlarge": "2.448",
	"g5.12xlarge": "5.672", "g5.48xlarge": "16.288",
	"m5.large": "0.096", "m5.xlarge": "0.192", "m6i.large": "0.096", "m6i.xlarge": "0.192",
	// Bare metal: the Price List lists it as its own product family with
	// Dedicated tenancy (Karpenter asks for it separately).
	"m5.metal": "4.608",
}

// servePricing answers the Price List Query API's GetProducts for AmazonEC2.
func (s *AWSStandIn) servePricing(w http.ResponseWriter, req awsRequest) bool {
	if req.service != "pricing" {
		return false
	}
	if req.op != "GetProducts" {
		writeAWSError(w, req.service, http.StatusBadRequest, "InvalidParameterException", "stand-in: the pricing stand-in answers GetProducts only, not "+req.op)
		return true
	}
	var in struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		writeAWSError(w, req.service, http.StatusBadRequest, "InvalidParameterException", "stand-in: "+err.Error())
		return true
	}
	types := make([]string, 0, len(onDemandListPrices))
	for t := range onDemandListPrices {
		types = append(types, t)
	}
	sort.Strings(types)
	list := []string{}
	for _, t := range types {
		family, tenancy := "Compute Instance", "Shared"
		if strings.HasSuffix(t, ".metal") {
			family, tenancy = "Compute Instance (bare metal)", "Dedicated"
		}
		attrs := map[string]string{"instanceType": t, "tenancy": tenancy, "productFamily": family, "preInstalledSw": "NA",
			"operatingSystem": "Linux", "capacitystatus": "Used", "marketoption": "OnDemand", "servicecode": "AmazonEC2"}
		for _, region := range []string{"us-east-1", "us-west-2"} {
			attrs["regionCode"] = region
			if in.ServiceCode != "AmazonEC2" || !matchesAll(attrs, in.Filters) {
				continue
			}
			doc, _ := json.Marshal(map[string]any{
				"product": map[string]any{"productFamily": family, "attributes": attrs},
				"terms": map[string]any{"OnDemand": map[string]any{"T.JRTCKXETXF": map[string]any{"priceDimensions": map[string]any{
					"T.JRTCKXETXF.6YS6EN2CT7": map[string]any{"unit": "Hrs", "pricePerUnit": map[string]string{"USD": onDemandListPrices[t]},
						"description": fmt.Sprintf("$%s per On Demand Linux %s Instance Hour", onDemandListPrices[t], t)}}}}},
			})
			list = append(list, string(doc))
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"FormatVersion": "aws_v1", "PriceList": list})
	return true
}

// matchesAll applies GetProducts' TERM_MATCH filters (field names are case
// insensitive, values exact).
func matchesAll(attrs map[string]string, filters []struct{ Type, Field, Value string }) bool {
	for _, f := range filters {
		found := false
		for k, v := range attrs {
			if strings.EqualFold(k, f.Field) {
				found = v == f.Value
			}
		}
		if !found {
			return false
		}
	}
	return true
}
