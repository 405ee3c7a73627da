package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// UnschedulableGrace is how long a pod may stay unschedulable before a
// rollout wait gives up: long enough for a rolling update's old pod to free
// its GPU or an autoscaler to add a node, short enough not to burn the
// whole timeout on a fleet that cannot fit.
const UnschedulableGrace = 3 * time.Minute

// RolloutError is a rollout that cannot finish: the reason is the
// scheduler's or the kubelet's own words.
type RolloutError struct {
	Object Ref
	// Reason is ProgressDeadlineExceeded, Unschedulable, ImagePullBackOff,
	// CrashLoopBackOff, ... or Timeout.
	Reason string
	// Detail quotes the pods' state, with the last log lines of a crashing container.
	Detail string
}

func (e *RolloutError) Error() string {
	return fmt.Sprintf("%s did not roll out (%s): %s", e.Object.Describe(), e.Reason, e.Detail)
}

// failFast are container waiting reasons that do not heal by waiting. A
// failed image pull is not among them: the kubelet retries it (ErrImagePull,
// then ImagePullBackOff), and podProblems judges it by the registry's words
// and by how long the kubelet has been backing off.
var failFast = map[string]bool{"InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true}

// The kubelet's container waiting reasons for a pull that failed and one
// it backs off from (pkg/kubelet/images: ErrImagePull, ErrImagePullBackOff),
// and for a container not created yet (volumes still mounting).
const (
	reasonErrImagePull      = "ErrImagePull"
	reasonImagePullBackOff  = "ImagePullBackOff"
	reasonContainerCreating = "ContainerCreating"
)

// WaitDeployment waits until the Deployment's newest generation is rolled
// out with every replica ready, logging where it stands every c.Progress
// ("5/8 ready; 3 Pending: 0/8 nodes are available: ..."). It fails at once on
// ProgressDeadlineExceeded and on pods that cannot start (image pulls,
// crash loops, with the last log lines), after UnschedulableGrace on pods the
// scheduler cannot place, and at the context's end with the same detail.
func (c *Client) WaitDeployment(ctx context.Context, namespace, name string) error {
	ref := Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: namespace, Name: name}
	began, lastLog := time.Now(), time.Now()
	unschedulableSince := time.Time{}
	// last is the newest state read: the context can end in the middle of
	// a poll, and the timeout then quotes what the poll before it saw.
	last := "no state read yet"
	timeout := func() error {
		return &RolloutError{Object: ref, Reason: "Timeout", Detail: fmt.Sprintf("after %s: %s", time.Since(began).Round(time.Second), last)}
	}
	for {
		st, err := c.rolloutState(ctx, namespace, name)
		if cutShort(ctx, err) {
			// The poll was cut short: its reading may be partial.
			return timeout()
		}
		if err != nil {
			return err
		}
		last = st.summary
		if st.done {
			c.logf(ctx, ref.Describe()+" rolled out", map[string]any{"summary": st.summary, "elapsed": time.Since(began).Round(time.Second).String()})
			return nil
		}
		if st.fatalReason != "" {
			return &RolloutError{Object: ref, Reason: st.fatalReason, Detail: st.summary}
		}
		if st.unschedulable {
			if unschedulableSince.IsZero() {
				unschedulableSince = time.Now()
			} else if time.Since(unschedulableSince) >= UnschedulableGrace {
				return &RolloutError{Object: ref, Reason: "Unschedulable", Detail: st.summary}
			}
		} else {
			unschedulableSince = time.Time{}
		}
		if time.Since(lastLog) >= c.Progress {
			lastLog = time.Now()
			c.logf(ctx, "waiting for "+ref.Describe()+": "+st.summary, map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return timeout()
		case <-time.After(c.Poll):
		}
	}
}

type rolloutState struct {
	done          bool
	summary       string
	fatalReason   string
	unschedulable bool
}

func (c *Client) rolloutState(ctx context.Context, namespace, name string) (rolloutState, error) {
	d, err := c.Typed.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return rolloutState{}, fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	summary := fmt.Sprintf("%d/%d ready", s.ReadyReplicas, want)
	if s.UpdatedReplicas < want {
		summary += fmt.Sprintf(", %d/%d updated", s.UpdatedReplicas, want)
	}
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
		s.AvailableReplicas == want && s.Replicas == want {
		return rolloutState{done: true, summary: summary}, nil
	}
	st := rolloutState{summary: summary}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentProgressing && cond.Status == corev1.ConditionFalse && cond.Reason == "ProgressDeadlineExceeded" {
			st.fatalReason = cond.Reason
			st.summary += "; " + cond.Message
		}
	}
	pods, err := c.podsOf(ctx, d)
	if err != nil {
		return rolloutState{}, err
	}
	problems, fatal, unschedulable := c.podProblems(ctx, pods)
	if len(problems) > 0 {
		st.summary += "; " + problems
	}
	if st.fatalReason == "" {
		st.fatalReason = fatal
	}
	st.unschedulable = unschedulable
	return st, nil
}

func (c *Client) podsOf(ctx context.Context, d *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("Deployment %s/%s selector: %w", d.Namespace, d.Name, err)
	}
	list, err := c.Typed.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return list.Items, nil
}

// podProblems groups the pods that are not ready by reason, quoting the
// scheduler's message, the container's state and the kubelet's newest
// image-pull or mount event: "3 Pending: 0/8 nodes are available: 8
// Insufficient nvidia.com/gpu". fatal names a reason waiting will not
// cure, with the crashing container's last log lines: a crash loop, an
// image that does not exist, a pull or a mount the kubelet has been
// retrying for longer than ImagePullGrace or MountGrace.
func (c *Client) podProblems(ctx context.Context, pods []corev1.Pod) (summary, fatal string, unschedulable bool) {
	groups := map[string]int{}
	setFatal := func(reason string) {
		if fatal == "" {
			fatal = reason
		}
	}
	for _, p := range pods {
		// Finished pods (a Job's, an evicted one) wait for nothing.
		if p.DeletionTimestamp != nil || podReady(&p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := string(p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				key = "Pending: " + cond.Message
				unschedulable = true
			}
		}
		statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		// Bound to a node with no container started: the kubelet is still mounting.
		pulling, creating := false, p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending && len(statuses) == 0
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil || w.Reason == "" {
				continue
			}
			key = fmt.Sprintf("%s (container %s): %s", w.Reason, cs.Name, w.Message)
			switch {
			case failFast[w.Reason]:
				setFatal(w.Reason)
				if w.Reason == "CrashLoopBackOff" && fatal == w.Reason {
					key += "; last log lines:\n" + c.lastLogLines(ctx, p, cs)
				}
			case w.Reason == reasonErrImagePull || w.Reason == reasonImagePullBackOff:
				pulling = true
				if imageMissing(w.Message) {
					setFatal("ImageNotFound")
				}
			case w.Reason == reasonContainerCreating:
				creating = true
			}
		}
		if pulling || creating {
			evs := c.podEvents(ctx, p)
			for _, v := range []struct {
				on      bool
				verdict func([]corev1.Event) eventVerdict
			}{{pulling, pullVerdict}, {creating, mountVerdict}} {
				if !v.on {
					continue
				}
				if ev := v.verdict(evs); ev.detail != "" {
					key += "; " + ev.detail
					if ev.fatal != "" {
						setFatal(ev.fatal)
					}
				}
			}
		}
		groups[key]++
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", groups[k], k))
	}
	return strings.Join(parts, "; "), fatal, unschedulable
}

// lastLogLines are the previous run's last lines of a crashing container,
// or its termination message where the logs cannot be read.
func (c *Client) lastLogLines(ctx context.Context, p corev1.Pod, cs corev1.ContainerStatus) string {
	raw, err := c.Typed.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true, TailLines: ptr.To[int64](10)}).DoRaw(ctx)
	if err == nil && len(raw) > 0 {
		return strings.TrimRight(string(raw), "\n")
	}
	if t := cs.LastTerminationState.Terminated; t != nil && t.Message != "" {
		return strings.TrimRight(t.Message, "\n")
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return "(logs unavailable: " + status.Status().Message + ")"
	}
	return fmt.Sprintf("(logs unavailable: %v)", err)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadyReplicas reads a Deployment's ready replica count (0 when it is gone).
func (c *Client) ReadyReplicas(ctx context.Context, namespace, name string) (int64, error) {
	d, err := c.Typed.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	return int64(d.Status.ReadyReplicas), nil
}

// WaitJob waits until a Job completes, logging every c.Progress. A failed
// Job is a *RolloutError naming it, with its pods' last words: the
// termination message, which the kubelet fills with the last log lines of a
// container with terminationMessagePolicy FallbackToLogsOnError. Pods that
// cannot start fail it early, as in WaitDeployment (podProblems).
func (c *Client) WaitJob(ctx context.Context, namespace, name string) error {
	ref := Ref{Group: "batch", Version: "v1", Kind: "Job", Namespace: namespace, Name: name}
	began, lastLog := time.Now(), time.Now()
	// The newest Job and pod problems read: the context can end in the
	// middle of a poll, and the timeout then quotes what the poll before it saw.
	var last *batchv1.Job
	lastProblems := ""
	timeout := func() error {
		detail := fmt.Sprintf("not complete after %s", time.Since(began).Round(time.Second))
		if last != nil {
			// The context has ended; the last words get a read of their own, bounded.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastWordsTimeout)
			defer cancel()
			detail += fmt.Sprintf(" (%d active, %d failed pods)%s%s", last.Status.Active, last.Status.Failed, lastProblems,
				c.jobLastWords(wctx, last))
		}
		return &RolloutError{Object: ref, Reason: "Timeout", Detail: detail}
	}
	for {
		job, err := c.Typed.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if cutShort(ctx, err) {
				return timeout()
			}
			return fmt.Errorf("reading Job %s/%s: %w", namespace, name, err)
		}
		for _, cond := range job.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				c.logf(ctx, ref.Describe()+" completed", map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
				return nil
			case batchv1.JobFailed:
				return &RolloutError{Object: ref, Reason: "JobFailed", Detail: cond.Reason + ": " + cond.Message + c.jobLastWords(ctx, job)}
			}
		}
		// The running pods' problems: an image that cannot be pulled or a
		// volume that cannot be mounted fails the wait as a Deployment's would.
		problems, fatal := "", ""
		if pods, err := c.Typed.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name}); err == nil {
			problems, fatal, _ = c.podProblems(ctx, pods.Items)
		}
		if ctx.Err() != nil {
			// The poll was cut short: its reading may be partial.
			return timeout()
		}
		if fatal != "" {
			return &RolloutError{Object: ref, Reason: fatal, Detail: problems}
		}
		if problems != "" {
			problems = "; " + problems
		}
		last, lastProblems = job, problems
		if time.Since(lastLog) >= c.Progress {
			lastLog = time.Now()
			c.logf(ctx, "waiting for "+ref.Describe()+problems, map[string]any{"active": job.Status.Active, "failed": job.Status.Failed,
				"elapsed": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return timeout()
		case <-time.After(c.Poll):
		}
	}
}

// cutShort reports whether a poll ended because the wait's context did. It
// is true once the context has ended, and also just before its deadline:
// client-go throttles every request through golang.org/x/time/rate, whose
// Wait refuses at once, with "rate: Wait(n=1) would exceed context
// deadline" (client-go wraps it as "client rate limiter Wait returned an
// error"), a wait that would end after the deadline, so a poll in the last
// milliseconds fails with the context still live. Both are the wait's
// timeout, not an API error.
func cutShort(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	_, hasDeadline := ctx.Deadline()
	return hasDeadline && err != nil && strings.Contains(err.Error(), "would exceed context deadline")
}

// lastWordsTimeout bounds the read of a timed-out Job's last words.
const lastWordsTimeout = 10 * time.Second

// jobLastWords quotes the newest failed pod's container termination message.
func (c *Client) jobLastWords(ctx context.Context, job *batchv1.Job) string {
	pods, err := c.Typed.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil || len(pods.Items) == 0 {
		return ""
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].CreationTimestamp.After(pods.Items[j].CreationTimestamp.Time)
	})
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				msg := strings.TrimRight(t.Message, "\n")
				if i := strings.LastIndex(msg, "\n"); i >= 0 {
					msg = msg[i+1:]
				}
				return fmt.Sprintf("; pod %s container %s exited %d (%s), last log line: %s", p.Name, cs.Name, t.ExitCode, t.Reason, msg)
			}
		}
	}
	return ""
}

// WaitServiceEndpoints waits, up to within, until the Service has a ready
// endpoint on port, and returns its ready endpoints as host:port. A pod's
// address turns ready in its EndpointSlice only once the pod is Ready and
// the EndpointSlice controller has caught up, which on a busy control plane
// (or right after a rollout) lags by seconds. It logs where it stands every
// c.Progress; a Service it cannot read fails at once.
func (c *Client) WaitServiceEndpoints(ctx context.Context, namespace, service string, port int32, within time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	began, lastLog := time.Now(), time.Now()
	for {
		addrs, err := c.ServiceEndpoints(ctx, namespace, service, port)
		if len(addrs) > 0 || err != nil && !cutShort(ctx, err) {
			return addrs, err
		}
		if time.Since(lastLog) >= c.Progress {
			lastLog = time.Now()
			c.logf(ctx, fmt.Sprintf("waiting for a ready endpoint behind Service %s/%s", namespace, service),
				map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("Service %s/%s had no ready endpoint on port %d within %s", namespace, service, port, within)
		case <-time.After(c.Poll):
		}
	}
}
