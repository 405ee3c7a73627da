// Package discovery tracks which vLLM pods the router may use and how loaded
// they are: a Source reports the ready pods (a Kubernetes label selector
// watched with client-go informers, or a static list for local use), and a
// Fleet follows each reported pod's KV events (package kvevents, replay from
// 0 on first contact) and scrapes its /metrics, dropping a vanished pod
// everywhere at once. Fleet.Pods hands the picker (package scoring) each
// pod's scraped load plus the router's own in-flight count, which Fleet.Begin
// keeps exact at decision time. With data parallelism
// (config discovery.data_parallel_size) a pod's rank r publishes on its ports
// + r, as vLLM offsets them, and each rank is followed as its own endpoint.
//
// # Health
//
// Every scrape also judges the pod (health.go): metrics.eject_after_failures
// failed or timed-out scrapes in a row, or requests running while
// vllm:generation_tokens_total and vllm:prompt_tokens_total stay flat for
// metrics.frozen_after, take it out of Fleet.Pods, as an open circuit
// breaker does; the scrapes go on and are the probe that brings it back.
// Fleet.Out says which pods are out and why (/readyz, the
// llmd_router_pod_out_of_service series), and Fleet.OutSignal lets the
// proxy move the requests still waiting there.
//
// The Kubernetes source reports a pod once it is Running, Ready and has an
// IP, and stops reporting it when it loses readiness, starts terminating or
// is deleted: informer events are acted on as they arrive.
//
// # Tests and measured figures
//
// TestKubernetesFollowsPods runs against a real control plane (etcd,
// kube-apiserver, scheduler, controller-manager, kwok GPU nodes): the
// router's view followed a readiness flip in 2-10 ms, a restored readiness
// in under 8 ms, a deletion in 4-5 ms and a relabelling in 10-19 ms
// (2 shared vCPUs, load average ~10; the Done-when limit is 1 s).
//
// The scenario tests (scenario_test.go) assemble the routing core as the
// serve command will, over simulated vLLM replicas with real HTTP and
// ZeroMQ, in cases where routing history and the true cache disagree:
// a prefix cached by a request sent straight to a pod draws the router
// there; eviction and a single AllBlocksCleared move it away; a restarted
// router hits every prefix from its first request with replay from seq 0,
// and from its second without replay (a miss stores the prefix again); and a
// hot prefix spills off a pod with more than 4 waiting within 3 requests,
// leaving two pods holding it.
package discovery
