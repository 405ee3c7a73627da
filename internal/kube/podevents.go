package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImagePullGrace is how long the kubelet may back off pulling an image
// before a wait gives up. The kubelet retries a failed pull with a back-off
// doubling up to 5 minutes (pkg/kubelet/images: backOff, MaxContainerBackOff
// 300s), so a rate limit (Docker Hub's toomanyrequests behind one NAT
// gateway) or a registry hiccup gets several retries first.
const ImagePullGrace = 6 * time.Minute

// MountGrace is how long the kubelet may keep failing to mount a pod's
// volumes before a wait gives up: the attach/detach controller and the
// kubelet's volume manager retry with a back-off of up to about 2 minutes,
// and a wrong FSx mount name or DNS name never heals.
const MountGrace = 5 * time.Minute

// The kubelet's event reasons (kubernetes/kubernetes pkg/kubelet/events/event.go:
// FailedToPullImage, BackOffPullImage, FailedMountVolume; FailedAttachVolume
// is the attach/detach controller's, on the pod).
const (
	eventFailedPull   = "Failed"
	eventBackOffPull  = "BackOff"
	eventFailedMount  = "FailedMount"
	eventFailedAttach = "FailedAttachVolume"
)

// missingImage are the words containerd and registries use for an image
// that is not there or not for us: retrying cannot help. containerd's
// resolver answers "<ref>: not found" (remotes/docker/resolver.go), a
// registry "manifest unknown" or "repository does not exist", Docker Hub
// "pull access denied", a private registry without credentials
// "unauthorized" / "403 Forbidden".
var missingImage = []string{": not found", "manifest unknown", "repository does not exist", "pull access denied", "unauthorized", "403 forbidden"}

// imageMissing reports whether a pull error says the image cannot be pulled at all.
func imageMissing(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range missingImage {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// podEvents are a pod's events, newest (by last occurrence) first; nil when
// they cannot be read (the wait still has the pod's status).
func (c *Client) podEvents(ctx context.Context, p corev1.Pod) []corev1.Event {
	list, err := c.Typed.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
	if err != nil {
		return nil
	}
	evs := list.Items
	sort.SliceStable(evs, func(i, j int) bool { return eventLast(evs[i]).After(eventLast(evs[j])) })
	return evs
}

// eventLast and eventFirst read an event series' span: the kubelet's
// recorder aggregates repeats into one event with a count and first and
// last timestamps (client-go tools/record, EventCorrelator).
func eventLast(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func eventFirst(e corev1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return eventLast(e)
}

// eventVerdict is what a pod's events say about a waiting pod.
type eventVerdict struct {
	// detail is the newest event's own words ("" when none applies).
	detail string
	// fatal names a reason the kubelet has been failing at for longer than its grace.
	fatal string
}

// pullVerdict reads a pod's image-pull events: the registry's words from
// the newest failed pull, fatal once the image is missing or the kubelet
// has backed off for ImagePullGrace.
func pullVerdict(evs []corev1.Event) eventVerdict {
	var v eventVerdict
	backOff := ""
	for _, e := range evs {
		switch {
		case e.Reason == eventFailedPull && strings.HasPrefix(e.Message, "Failed to pull image") && v.detail == "":
			v.detail = e.Message
			if imageMissing(e.Message) {
				v.fatal = "ImageNotFound"
			}
		case e.Reason == eventBackOffPull && eventLast(e).Sub(eventFirst(e)) >= ImagePullGrace && backOff == "":
			backOff = fmt.Sprintf("%s (%d times over %s)", e.Message, e.Count, eventLast(e).Sub(eventFirst(e)).Round(time.Second))
		}
	}
	if backOff != "" {
		if v.fatal == "" {
			v.fatal = "ImagePullBackOff"
		}
		if v.detail == "" {
			v.detail = backOff
		} else {
			v.detail += "; " + backOff
		}
	}
	return v
}

// mountVerdict reads a pod's volume events: the newest FailedMount or
// FailedAttachVolume, fatal once that series has gone on for MountGrace.
func mountVerdict(evs []corev1.Event) eventVerdict {
	for _, e := range evs {
		if e.Reason == eventFailedMount || e.Reason == eventFailedAttach {
			v := eventVerdict{detail: e.Reason + ": " + e.Message}
			if eventLast(e).Sub(eventFirst(e)) >= MountGrace {
				v.fatal = e.Reason
			}
			return v
		}
	}
	return eventVerdict{}
}
