package awsinfra

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

// The FSx CSI driver's controller provisions and expands file systems with
// its own AWS identity, never the node role's: EKS Pod Identity binds its
// service account to a role EKS's pods service may assume. The EKS user
// guide "Deploy the FSx for Lustre driver" (fsx-csi-create) gives the
// service account (fsx-csi-controller-sa in kube-system), the AWS managed
// policy AmazonFSxFullAccess for the role, and the requirement of the Pod
// Identity agent; "Create a Pod Identity association" (pod-id-association)
// gives the trust: service pods.eks.amazonaws.com, actions sts:AssumeRole and
// sts:TagSession (ensureRole's trust policy).
const (
	fsxCSIAddon          = "aws-fsx-csi-driver"
	fsxCSINamespace      = "kube-system"
	fsxCSIServiceAccount = "fsx-csi-controller-sa"
)

var fsxCSIRole = roleSpec{suffix: "-fsx-csi", service: "pods.eks.amazonaws.com", policies: []string{"AmazonFSxFullAccess"}}

// PodIdentity is one EKS Pod Identity association of a cluster.
type PodIdentity struct {
	ID             string
	Namespace      string
	ServiceAccount string
	RoleARN        string
}

// ensureFSxCSIIdentity gives the FSx CSI driver's controller its role and
// binds it to the controller's service account, before the add-on is
// installed, so its pods start with the credentials. An association already
// there for the service account is kept, or pointed at the role when it
// names another.
func (c *Clients) ensureFSxCSIIdentity(ctx context.Context, spec ClusterSpec) error {
	roleARN, err := c.ensureRole(ctx, spec, fsxCSIRole)
	if err != nil {
		return err
	}
	return c.BindServiceAccount(ctx, spec.Name, fsxCSINamespace, fsxCSIServiceAccount, roleARN, spec.Tags)
}

// findPodIdentity is the association of one service account; nil when there is none.
func (c *Clients) findPodIdentity(ctx context.Context, cluster, namespace, serviceAccount string) (*PodIdentity, error) {
	p := eks.NewListPodIdentityAssociationsPaginator(c.EKS, &eks.ListPodIdentityAssociationsInput{ClusterName: aws.String(cluster),
		Namespace: aws.String(namespace), ServiceAccount: aws.String(serviceAccount)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing EKS Pod Identity associations of %s/%s in cluster %s: %w", namespace, serviceAccount, cluster, err)
		}
		for _, a := range page.Associations {
			if aws.ToString(a.Namespace) != namespace || aws.ToString(a.ServiceAccount) != serviceAccount {
				continue
			}
			// The summary lacks the role: describe the association for it.
			out, err := c.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(cluster), AssociationId: a.AssociationId})
			if err != nil {
				return nil, fmt.Errorf("describing EKS Pod Identity association %s of cluster %s: %w", aws.ToString(a.AssociationId), cluster, err)
			}
			return &PodIdentity{ID: aws.ToString(a.AssociationId), Namespace: namespace, ServiceAccount: serviceAccount,
				RoleARN: aws.ToString(out.Association.RoleArn)}, nil
		}
	}
	return nil, nil
}

// deleteFSxCSIIdentity removes the driver's association and role once the
// driver is turned off. A cluster's destroy needs neither call: EKS deletes
// a cluster's associations with it, and deleteRoles removes the role.
func (c *Clients) deleteFSxCSIIdentity(ctx context.Context, cluster string) error {
	if err := c.UnbindServiceAccount(ctx, cluster, fsxCSINamespace, fsxCSIServiceAccount); err != nil {
		return err
	}
	return c.deleteRole(ctx, cluster, roleName(cluster, c.Config.Region, fsxCSIRole))
}
