package testenv

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"
)

// TestStandInPriceListFilters checks GetProducts' TERM_MATCH filtering the
// way Karpenter asks (KarpenterVersion's pricing provider): shared-tenancy
// instances and bare metal separately, by region, operating system and
// market; a filter nothing matches answers an empty list, not an error.
func TestStandInPriceListFilters(t *testing.T) {
	s := StartAWSStandIn(t, StartMoto(t))
	products := func(filters map[string]string) map[string]string {
		t.Helper()
		in := map[string]any{"ServiceCode": "AmazonEC2"}
		var fs []map[string]string
		for k, v := range filters {
			fs = append(fs, map[string]string{"Type": "TERM_MATCH", "Field": k, "Value": v})
		}
		in["Filters"] = fs
		body, _ := json.Marshal(in)
		req, _ := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(body))
		req.Header.Set("X-Amz-Target", "AWSPriceListService.GetProducts")
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261206/us-east-1/pricing/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ PriceList []string }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GetProducts: %d %v", resp.StatusCode, err)
		}
		prices := map[string]string{}
		for _, doc := range out.PriceList {
			var p struct {
				Product struct{ Attributes map[string]string }
				Terms   struct {
					OnDemand map[string]struct {
						PriceDimensions map[string]struct{ PricePerUnit map[string]string }
					}
				}
			}
			if err := json.Unmarshal([]byte(doc), &p); err != nil {
				t.Fatalf("a PriceList entry is not a product document: %v", err)
			}
			for _, term := range p.Terms.OnDemand {
				for _, d := range term.PriceDimensions {
					prices[p.Product.Attributes["instanceType"]] = d.PricePerUnit["USD"]
				}
			}
		}
		return prices
	}
	karpenter := map[string]string{"regionCode": "us-west-2", "serviceCode": "AmazonEC2", "preInstalledSw": "NA", "operatingSystem": "Linux",
		"capacitystatus": "Used", "marketoption": "OnDemand"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range karpenter {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	shared := products(with(map[string]string{"tenancy": "Shared", "productFamily": "Compute Instance"}))
	if shared["g5.xlarge"] != "1.006" || shared["m5.metal"] != "" {
		t.Errorf("shared-tenancy instances: %v, want g5.xlarge at 1.006 and no bare metal", shared)
	}
	metal := products(with(map[string]string{"tenancy": "Dedicated", "productFamily": "Compute Instance (bare metal)"}))
	if types := slices.Sorted(maps.Keys(metal)); !slices.Equal(types, []string{"m5.metal"}) {
		t.Errorf("bare metal: %v, want m5.metal only", metal)
	}
	if got := products(with(map[string]string{"operatingSystem": "Windows"})); len(got) != 0 {
		t.Errorf("Windows: %v, want nothing", got)
	}
	if got := products(with(map[string]string{"regionCode": "eu-north-1"})); len(got) != 0 {
		t.Errorf("a region without list prices here: %v, want nothing", got)
	}
}
