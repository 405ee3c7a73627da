package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxLogLine bounds one log line read by FollowLogs; a longer line is cut
// into pieces of this size rather than ending the stream.
const maxLogLine = 1 << 20

// FollowLogs passes a container's log lines to line as the container writes
// them, until the pod has ended and every line is read, or ctx ends. It
// waits while the container has not started. A stream that closes while
// the pod still runs (a proxy's idle timeout, a node's restart) is opened
// again from the last line's timestamp, and lines already passed are
// skipped. A stream still open after the pod has ended is closed, and the
// rest of the log read once without following: a kubelet whose container
// runtime does not answer keeps following a container that has exited
// (k8s.io/cri-client's pkg/logs assumes it still runs), as kwok's always does.
func (c *Client) FollowLogs(ctx context.Context, namespace, pod, container string, line func(string)) error {
	var last time.Time
	for {
		stream, cancel := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() {
			err := c.waitPodEnd(stream, namespace, pod)
			cancel() // the pod has ended: stop following
			ended <- err
		}()
		opened := c.readLog(stream, namespace, pod, container, true, &last, line)
		cancel()
		endErr := <-ended
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if endErr != nil && !errors.Is(endErr, context.Canceled) {
			return endErr
		}
		if over, err := c.podEnded(ctx, namespace, pod); err != nil {
			return err
		} else if over {
			if !c.readLog(ctx, namespace, pod, container, false, &last, line) && !opened {
				return fmt.Errorf("pod %s/%s ended with no log of container %s to read", namespace, pod, container)
			}
			return nil
		}
		if !opened {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(c.Poll):
			}
		}
	}
}

// readLog reads the container's log from after *last, following it or
// not, passing each newer line; it reports whether the log could be opened.
func (c *Client) readLog(ctx context.Context, namespace, pod, container string, follow bool, last *time.Time, line func(string)) bool {
	opts := &corev1.PodLogOptions{Container: container, Follow: follow, Timestamps: true}
	if !last.IsZero() {
		// SinceTime has a second's precision: the lines of that second come again.
		opts.SinceTime = &metav1.Time{Time: *last}
	}
	stream, err := c.Typed.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return false
	}
	defer stream.Close()
	r := bufio.NewReaderSize(stream, 64<<10)
	for {
		text, err := readLine(r)
		if text != "" || err == nil {
			*last = passNewer(text, *last, line)
		}
		if err != nil {
			return true
		}
	}
}

// waitPodEnd returns once the pod has ended (nil) or ctx has.
func (c *Client) waitPodEnd(ctx context.Context, namespace, pod string) error {
	for {
		over, err := c.podEnded(ctx, namespace, pod)
		if err != nil || over {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.Poll):
		}
	}
}

// podEnded reports whether the pod has Succeeded or Failed.
func (c *Client) podEnded(ctx context.Context, namespace, pod string) (bool, error) {
	p, err := c.Typed.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("reading pod %s/%s: %w", namespace, pod, err)
	}
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
}

// readLine reads one line without its newline, at most maxLogLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		chunk, isPrefix, err := r.ReadLine()
		b.Write(chunk)
		if err != nil || !isPrefix || b.Len() >= maxLogLine {
			return b.String(), err
		}
	}
}

// passNewer passes a timestamped log line's text to line when it is newer
// than last, and returns the newest timestamp seen. A line without a
// timestamp is passed as it is.
func passNewer(raw string, last time.Time, line func(string)) time.Time {
	stamp, text, _ := strings.Cut(raw, " ")
	t, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		line(raw)
		return last
	}
	if t.After(last) {
		line(text)
		return t
	}
	return last
}

// ServiceEndpoints are the ready addresses behind a Service port, as
// host:port, from the Service's EndpointSlices: what its ClusterIP spreads
// connections over.
func (c *Client) ServiceEndpoints(ctx context.Context, namespace, service string, port int32) ([]string, error) {
	svc, err := c.Typed.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", namespace, service, err)
	}
	portName, found := "", false
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			portName, found = p.Name, true
		}
	}
	if !found {
		return nil, fmt.Errorf("Service %s/%s has no port %d", namespace, service, port)
	}
	slices, err := c.Typed.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, fmt.Errorf("listing Service %s/%s's EndpointSlices: %w", namespace, service, err)
	}
	var out []string
	for _, s := range slices.Items {
		target := int32(0)
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(target))))
			}
		}
	}
	return out, nil
}
