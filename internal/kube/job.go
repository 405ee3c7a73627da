package kube

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplaceFailedJob deletes the Job when it has failed, and waits until it
// and its pods are gone, so that applying it again runs it again: a
// finished Job never restarts, and an apply of the same spec would leave
// its failure standing. A Job that runs, succeeded or does not exist is left
// alone. It reports whether it deleted one.
func (c *Client) ReplaceFailedJob(ctx context.Context, namespace, name string) (bool, error) {
	job, err := c.Typed.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Job %s/%s: %w", namespace, name, err)
	}
	if !jobFailed(job) {
		return false, nil
	}
	c.logf(ctx, "replacing failed Job "+namespace+"/"+name, map[string]any{"failed_pods": job.Status.Failed})
	// Foreground: the Job goes only after its pods, so the new Job's pods
	// (same job-name label) are the only ones a wait quotes.
	fg := metav1.DeletePropagationForeground
	err = c.Typed.BatchV1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg,
		Preconditions: &metav1.Preconditions{UID: &job.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting failed Job %s/%s: %w", namespace, name, err)
	}
	for {
		_, err := c.Typed.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading Job %s/%s: %w", namespace, name, err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("failed Job %s/%s still being deleted: %w", namespace, name, ctx.Err())
		case <-time.After(c.Poll):
		}
	}
}

func jobFailed(job *batchv1.Job) bool {
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// DeleteOtherJobs deletes the Jobs matching selector other than keep, with
// their pods, and waits until they are gone: a Job superseded by a new
// template (or one an interrupted apply left behind) would otherwise stay,
// a failed one keeping kube-state-metrics' kube_job_failed, and with it a
// staging alert, firing.
func (c *Client) DeleteOtherJobs(ctx context.Context, namespace, selector, keep string) error {
	jobs, err := c.Typed.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("listing Jobs %s in %s: %w", selector, namespace, err)
	}
	var refs []Ref
	for _, j := range jobs.Items {
		if j.Name != keep {
			refs = append(refs, Ref{Group: "batch", Version: "v1", Kind: "Job", Namespace: namespace, Name: j.Name})
		}
	}
	return c.Delete(ctx, refs)
}
