package awsinfra

import (
	"context"
	"fmt"
	"time"
)

// iamPropagationLimit bounds how long a create retries EKS's rejections of a
// role IAM has not finished propagating: terraform-provider-aws bounds the
// same retries by its IAM propagation timeout of two minutes
// (internal/service/iam PropagationTimeout). A rejection that outlasts it is
// a wrong role, not a slow one.
const iamPropagationLimit = 2 * time.Minute

// settleLimit bounds how long a delete wait takes a part still reading
// ACTIVE or AVAILABLE right after its delete call for eventual consistency
// (terraform-provider-aws waits through ACTIVE in eks waitClusterDeleted
// and waitNodegroupDeleted, and through AVAILABLE for FSx); past it the
// delete did not take.
const settleLimit = 2 * time.Minute

// createRetryingIAM runs create until it is accepted (or finds the object
// there already: ResourceInUseException from an earlier request that got
// through), retrying IAM-propagation rejections for at most
// iamPropagationLimit.
func (c *Clients) createRetryingIAM(ctx context.Context, what string, create func(context.Context) error) error {
	var first time.Time
	return c.waitFor(ctx, what, func(ctx context.Context) error {
		err := create(ctx)
		switch {
		case err == nil || isCode(err, "ResourceInUseException"):
			return nil
		case isIAMPropagation(err):
			if first.IsZero() {
				first = time.Now()
			}
			if time.Since(first) > iamPropagationLimit {
				return fmt.Errorf("still rejected after %s of IAM propagation; check the role: %w", iamPropagationLimit, err)
			}
			return pending("%s", errorMessage(err))
		default:
			return err
		}
	})
}

// settling says whether a part that still reads a live state after its
// delete call is within settleLimit of the call.
func settling(since time.Time) bool { return time.Since(since) < settleLimit }

// whileInUse runs call until EKS accepts it, waiting for the object to be
// ready (ready) whenever EKS answers ResourceInUseException: EKS runs one
// update (or delete) of an object at a time and refuses the next meanwhile
// (terraform-provider-aws eks/cluster.go retries DeleteCluster's
// ResourceInUseException).
func (c *Clients) whileInUse(ctx context.Context, what string, call func(context.Context) error, ready func(context.Context) error) error {
	for {
		err := call(ctx)
		if !isCode(err, "ResourceInUseException") {
			return err
		}
		c.logf(ctx, "EKS is busy with "+what+"; waiting for it before trying again", map[string]any{"error": errorMessage(err)})
		if err := ready(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out: %s: %w", what, err)
		case <-time.After(c.pollInterval()):
		}
	}
}
