package awsinfra

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

// ListOwnedClusters names the EKS clusters in the clients' region that an
// llmd_inference_cluster made: those whose owner tag is their own name (a
// cluster made elsewhere has none, and one another cluster's parts name is
// never an EKS cluster). Sorted, so a query lists them in a stable order.
//
// ListClusters returns names only, so each is described for its tags; a
// cluster deleted between the two calls is skipped.
func (c *Clients) ListOwnedClusters(ctx context.Context) ([]string, error) {
	var names []string
	pages := eks.NewListClustersPaginator(c.EKS, &eks.ListClustersInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing EKS clusters in %s: %w", c.Config.Region, err)
		}
		names = append(names, page.Clusters...)
	}
	var owned []string
	for _, name := range names {
		cl, err := c.findEKSClusterByName(ctx, name)
		if err != nil {
			return nil, err
		}
		if cl != nil && cl.Tags[OwnerTag] == aws.ToString(cl.Name) {
			owned = append(owned, name)
		}
	}
	sort.Strings(owned)
	return owned, nil
}
