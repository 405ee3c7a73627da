package awsinfra

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/fsx"
	fsxtypes "github.com/aws/aws-sdk-go-v2/service/fsx/types"
)

// findAssociation is the file system's data repository association at its
// root, the one the cluster manages; nil when there is none.
func (c *Clients) findAssociation(ctx context.Context, fileSystemID string) (*fsxtypes.DataRepositoryAssociation, error) {
	out, err := c.FSx.DescribeDataRepositoryAssociations(ctx, &fsx.DescribeDataRepositoryAssociationsInput{
		Filters: []fsxtypes.Filter{{Name: fsxtypes.FilterNameFileSystemId, Values: []string{fileSystemID}}}})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing data repository associations of %s: %w", fileSystemID, err)
	}
	for _, a := range out.Associations {
		if aws.ToString(a.FileSystemPath) == "/" && a.Lifecycle != fsxtypes.DataRepositoryLifecycleDeleting {
			return &a, nil
		}
	}
	return nil, nil
}

// ensureAssociation links the file system's root to the S3 import URI with
// a data repository association (metadata imported on create, then kept in
// step when auto import is on) and waits until it is AVAILABLE, which on AWS
// takes minutes for a large bucket.
func (c *Clients) ensureAssociation(ctx context.Context, spec ClusterSpec, fileSystemID string) error {
	if spec.Storage.S3ImportURI == "" {
		return nil
	}
	have, err := c.findAssociation(ctx, fileSystemID)
	if err != nil {
		return err
	}
	var id string
	if have != nil {
		id = aws.ToString(have.AssociationId)
		c.adopted(ctx, "FSx data repository association", id)
	} else {
		s3 := &fsxtypes.S3DataRepositoryConfiguration{}
		if spec.Storage.AutoImport {
			s3.AutoImportPolicy = &fsxtypes.AutoImportPolicy{Events: []fsxtypes.EventType{fsxtypes.EventTypeNew, fsxtypes.EventTypeChanged, fsxtypes.EventTypeDeleted}}
		}
		out, err := c.FSx.CreateDataRepositoryAssociation(ctx, &fsx.CreateDataRepositoryAssociationInput{
			FileSystemId: aws.String(fileSystemID), FileSystemPath: aws.String("/"), DataRepositoryPath: aws.String(spec.Storage.S3ImportURI),
			BatchImportMetaDataOnCreate: aws.Bool(true), S3: s3, Tags: fsxTags(c.tagSet(spec.Name, spec.Tags, "model-storage-s3"))})
		if err != nil {
			return fmt.Errorf("linking file system %s to %s (model_storage.s3_import): %w", fileSystemID, spec.Storage.S3ImportURI, err)
		}
		id = aws.ToString(out.Association.AssociationId)
	}
	return c.waitAssociation(ctx, id, fsxtypes.DataRepositoryLifecycleAvailable)
}

// waitAssociation waits for the association to reach want, or to be gone
// when want is DELETING; FAILED and MISCONFIGURED (a bucket FSx cannot
// read) end the wait with FSx's reason.
func (c *Clients) waitAssociation(ctx context.Context, id string, want fsxtypes.DataRepositoryLifecycle) error {
	what := "FSx data repository association " + id + " to become " + string(want)
	if want == fsxtypes.DataRepositoryLifecycleDeleting {
		what = "FSx data repository association " + id + " to be deleted"
	}
	return c.waitFor(ctx, what, func(ctx context.Context) error {
		out, err := c.FSx.DescribeDataRepositoryAssociations(ctx, &fsx.DescribeDataRepositoryAssociationsInput{AssociationIds: []string{id}})
		gone := isNotFound(err) || (err == nil && len(out.Associations) == 0)
		switch {
		case gone && want == fsxtypes.DataRepositoryLifecycleDeleting:
			return nil
		case gone:
			return pending("not found yet")
		case err != nil:
			return fmt.Errorf("describing data repository association %s: %w", id, err)
		}
		a := out.Associations[0]
		switch a.Lifecycle {
		case want:
			if want == fsxtypes.DataRepositoryLifecycleDeleting {
				return pending("lifecycle DELETING")
			}
			return nil
		case fsxtypes.DataRepositoryLifecycleCreating, fsxtypes.DataRepositoryLifecycleUpdating, fsxtypes.DataRepositoryLifecycleDeleting:
			return pending("lifecycle %s", a.Lifecycle)
		default:
			reason := "no reason given"
			if a.FailureDetails != nil {
				reason = aws.ToString(a.FailureDetails.Message)
			}
			return fmt.Errorf("data repository association %s is %s: %s", id, a.Lifecycle, reason)
		}
	})
}

// deleteAssociation unlinks S3 (the files already on the file system stay).
func (c *Clients) deleteAssociation(ctx context.Context, id string) error {
	if _, err := c.FSx.DeleteDataRepositoryAssociation(ctx, &fsx.DeleteDataRepositoryAssociationInput{AssociationId: aws.String(id),
		DeleteDataInFileSystem: aws.Bool(false)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting data repository association %s: %w", id, err)
	}
	return c.waitAssociation(ctx, id, fsxtypes.DataRepositoryLifecycleDeleting)
}
