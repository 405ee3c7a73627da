package awsinfra

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// updateTarget names what an EKS update runs on: the cluster, one of its
// node groups or one of its add-ons.
type updateTarget struct {
	cluster, nodegroup, addon string
}

func (t updateTarget) String() string {
	switch {
	case t.nodegroup != "":
		return "EKS node group " + t.nodegroup
	case t.addon != "":
		return "EKS add-on " + t.addon
	default:
		return "EKS cluster " + t.cluster
	}
}

// waitUpdate follows one EKS update by its id until it is Successful. A
// status of ACTIVE alone does not say the change landed: EKS reports ACTIVE
// again after a Failed update, which only DescribeUpdate tells, with the
// errors that say why.
func (c *Clients) waitUpdate(ctx context.Context, t updateTarget, u *ekstypes.Update) error {
	if u == nil || u.Id == nil {
		return fmt.Errorf("%s: EKS answered the update without an update id", t)
	}
	id := aws.ToString(u.Id)
	in := &eks.DescribeUpdateInput{Name: aws.String(t.cluster), UpdateId: aws.String(id)}
	if t.nodegroup != "" {
		in.NodegroupName = aws.String(t.nodegroup)
	}
	if t.addon != "" {
		in.AddonName = aws.String(t.addon)
	}
	return c.waitFor(ctx, fmt.Sprintf("%s update %s (%s) to finish", t, id, u.Type), func(ctx context.Context) error {
		out, err := c.EKS.DescribeUpdate(ctx, in)
		if err != nil {
			return fmt.Errorf("describing update %s of %s: %w", id, t, err)
		}
		switch st := out.Update.Status; st {
		case ekstypes.UpdateStatusSuccessful:
			return nil
		case ekstypes.UpdateStatusInProgress:
			return pending("update %s", st)
		default:
			return fmt.Errorf("update %s of %s is %s%s", id, t, st, updateErrors(out.Update.Errors))
		}
	})
}

func updateErrors(errs []ekstypes.ErrorDetail) string {
	if len(errs) == 0 {
		return " (no errors reported)"
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = issueText(string(e.ErrorCode), aws.ToString(e.ErrorMessage), e.ResourceIds)
	}
	return ": " + strings.Join(parts, "; ")
}
