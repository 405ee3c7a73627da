package awsinfra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// Identity is who the provider's credentials act as.
type Identity struct {
	AccountID string
	// ARN is what STS GetCallerIdentity returned (for a role, the assumed-role session ARN).
	ARN    string
	UserID string
	// PrincipalARN is the IAM principal to grant access to: the IAM role ARN (with its path)
	// for an assumed-role session, else ARN itself. EKS access entries take this, never a session ARN.
	PrincipalARN string
}

// FindCallerIdentity asks STS who the credentials are and resolves an assumed-role
// session to its IAM role.
func FindCallerIdentity(ctx context.Context, c *Clients) (Identity, error) {
	out, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return Identity{}, fmt.Errorf("calling STS GetCallerIdentity: %w", err)
	}
	id := Identity{AccountID: aws.ToString(out.Account), ARN: aws.ToString(out.Arn), UserID: aws.ToString(out.UserId)}
	id.PrincipalARN, err = principalARN(ctx, c.IAM, id.ARN)
	return id, err
}

// callerPartition is the ARN partition of the credentials (aws, aws-cn,
// aws-us-gov), from STS GetCallerIdentity: every ARN the provider builds
// (managed policies, the admin access policy) is in the caller's partition,
// whatever the region's name suggests.
func (c *Clients) callerPartition(ctx context.Context) (string, error) {
	out, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("calling STS GetCallerIdentity for the ARN partition: %w", err)
	}
	a, err := arn.Parse(aws.ToString(out.Arn))
	if err != nil {
		return "", fmt.Errorf("parsing caller ARN %q: %w", aws.ToString(out.Arn), err)
	}
	return a.Partition, nil
}

// principalARN maps arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION to the role's
// IAM ARN. The session ARN drops the role's path, so the role is looked up by name
// to get the exact ARN; if IAM denies iam:GetRole, the path-less ARN is the best
// answer left, and it is exact for the common case of a role without a path.
func principalARN(ctx context.Context, client *iam.Client, callerARN string) (string, error) {
	a, err := arn.Parse(callerARN)
	if err != nil {
		return "", fmt.Errorf("parsing caller ARN %q: %w", callerARN, err)
	}
	if a.Service != "sts" || !strings.HasPrefix(a.Resource, "assumed-role/") {
		return callerARN, nil
	}
	parts := strings.Split(a.Resource, "/")
	if len(parts) < 3 {
		return "", fmt.Errorf("caller ARN %q: assumed-role resource lacks role or session name", callerARN)
	}
	roleName := parts[1]
	fallback := arn.ARN{Partition: a.Partition, Service: "iam", AccountID: a.AccountID, Resource: "role/" + roleName}.String()
	out, err := client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDenied" {
			return fallback, nil
		}
		return "", fmt.Errorf("resolving assumed role %s to its IAM role: %w", roleName, err)
	}
	return aws.ToString(out.Role.Arn), nil
}
