// Package discovery tracks which vLLM pods the router may use and how loaded
// they are: a Source reports the ready pods (a Kubernetes label selector
// watched with client-go informers, or a static list for local use), and a
// Fleet follows each reported pod's KV events (package kvevents, replay from
// 0 on first contact) and scrapes its /metrics, dropping a vanished pod
// everywhere at once. Fleet.Pods hands the picker (package scoring) each
// pod's scraped load plus the router's own in-flight count, which Fleet.Begin
// keeps exact at decision time.
//
// The Kubernetes source reports a pod once it is Running, Ready and has an
// IP, and stops reporting it when it loses readiness, starts terminating or
// is deleted: informer events are acted on as they arrive, within
// milliseconds of the API server's watch event (TestKubernetesFollowsPods
// measures it against a real control plane).
package discovery
