// EKS Auto Mode's compute on the test ground. On AWS, enabling a cluster's
// computeConfig makes EKS install the NodeClass (eks.amazonaws.com/v1),
// NodePool and NodeClaim (karpenter.sh/v1) CRDs and run a Karpenter of its
// own outside the cluster, which launches Bottlerocket-based nodes for the
// NodePools that name a NodeClass (Amazon EKS User Guide: "Automate cluster
// infrastructure with EKS Auto Mode" says it relies on Karpenter; "Compare
// EKS Auto Mode with managed node groups" says Bottlerocket is required).
// That controller is not published; the ground runs the real Karpenter
// (KarpenterVersion's kwok build) in its place and bridges the Auto Mode
// kinds onto the kinds that build reconciles.

package testenv

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// nodeClassCRD is the ground's NodeClass CRD, written from the EKS User
// Guide (the file says which pages).
//
//go:embed automode/eks.amazonaws.com_nodeclasses.yaml
var nodeClassCRD []byte

var (
	nodeClassResource    = schema.GroupVersionResource{Group: "eks.amazonaws.com", Version: "v1", Resource: "nodeclasses"}
	nodePoolResource     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	ec2NodeClassResource = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

const (
	// autoModeFinalizer is the finalizer EKS puts on every NodeClass: it
	// stays until the nodes launched for the class are gone (seen on the
	// NodeClasses EKS creates, e.g. aws-samples/eks-workshop-v2 "Inspect
	// Karpenter configuration", `kubectl get nodeclass default -o yaml`).
	autoModeFinalizer = "eks.amazonaws.com/termination"
	// autoModeComputeTypeLabel is on every Auto Mode node, valued "auto"
	// (EKS User Guide, "Control if a workload is deployed on EKS Auto Mode
	// nodes"; "Create a Node Pool for EKS Auto Mode", supported labels).
	autoModeComputeTypeLabel = "eks.amazonaws.com/compute-type"
	// autoModeMirrorSuffix ends the names of the EC2NodeClass and NodePool
	// the ground makes for a NodeClass and a NodePool.
	autoModeMirrorSuffix = "-eks-auto"

	// autoModeSourceLabel names, on a mirror, the object it mirrors.
	autoModeSourceLabel = "testenv.llmd.dev/auto-mode-source"
	// autoModeSpecAnnotation is a digest of the spec a mirror was made
	// from, so a mirror is rewritten only when its source changed (the
	// API server adds defaults to the mirror that its source lacks).
	autoModeSpecAnnotation = "testenv.llmd.dev/auto-mode-spec"
)

// autoModeLabels are the EKS node labels Auto Mode's NodePools may require
// that Karpenter spells karpenter.k8s.aws/<same> (EKS User Guide, "Create a
// Node Pool for EKS Auto Mode", supported labels).
var autoModeLabels = []string{"instance-hypervisor", "instance-encryption-in-transit-supported", "instance-category",
	"instance-generation", "instance-family", "instance-size", "instance-cpu", "instance-cpu-manufacturer", "instance-memory",
	"instance-ebs-bandwidth", "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer",
	"instance-gpu-count", "instance-gpu-memory", "instance-local-nvme"}

// PlayAutoMode plays EKS Auto Mode's compute for the EKS cluster
// clusterName on c, for the test's duration.
//
// Real: the controller is Karpenter (KarpenterVersion's kwok build, run as
// StartKarpenter runs it, with no Deployment, as in Auto Mode): scheduling,
// bin packing, NodePool limits, disruption and consolidation, capacity
// reservations, and its AWS calls (subnets, security groups, the node
// role's instance profile, Bottlerocket's AMIs through EKS's public SSM
// parameters, prices, launches) against the AWS stand-in. The NodePool and
// NodeClaim CRDs are Karpenter's own.
//
// Played: while s.AutoModeEnabled(clusterName), the CRDs EKS installs are
// there (NodeClass from the ground's manifest, written from the EKS User
// Guide; NodePool, NodeClaim and, for the bridge, EC2NodeClass from
// Karpenter's module) and the controller runs. A bridge gives each NodeClass
// the finalizer eks.amazonaws.com/termination and a mirror EC2NodeClass
// named <name>-eks-auto (alias bottlerocket@latest; the role, the subnet,
// security group and capacity reservation terms, the tags;
// ephemeralStorage as Bottlerocket's data volume), and each NodePool on an
// eks.amazonaws.com NodeClass a mirror NodePool <name>-eks-auto with the
// same spec on that EC2NodeClass (eks.amazonaws.com/instance-* requirements
// spelled karpenter.k8s.aws/instance-*; the template label
// eks.amazonaws.com/compute-type=auto). Mirrors follow their sources and go
// with them. The mirror EC2NodeClass's Ready condition, and the mirror
// NodePool's conditions, nodes and resources, are copied onto the sources'
// status. A deleted NodeClass keeps its finalizer until its mirror is gone,
// which Karpenter holds while NodeClaims of it remain, so a deleter waiting
// for the NodeClass waits for its nodes. When Auto Mode turns off, Karpenter
// terminates the nodes (EKS terminates the instances it operates: "Disable
// EKS Auto Mode"), the mirrors go, the finalizers are released and the
// controller stops; the CRDs stay until the test ends.
//
// Not played: NodeClaims and nodes name the mirrors (a node carries
// karpenter.sh/nodepool=<name>-eks-auto where Auto Mode's carries <name>:
// select a pool's nodes by its template labels); nodes carry Karpenter's
// karpenter.k8s.aws/instance-* labels, not eks.amazonaws.com/instance-*;
// EKS's built-in NodePools (general-purpose, system) are not made; NodePools
// on an EC2NodeClass are served too (Auto Mode's controller leaves them to
// the cluster's own Karpenter). PlayKarpenter or StartKarpenter in the same
// test is not supported: each kwok build deletes the nodes it did not launch.
func PlayAutoMode(t testing.TB, c *Cluster, s *AWSStandIn, clusterName string) {
	t.Helper()
	crds := KarpenterCRDs(t) // skips the test (fails it in CI) without Karpenter
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := &autoModePlayer{t: t, c: c, s: s, cluster: clusterName, dyn: dyn, wake: make(chan struct{}, 1), followed: map[string]int64{},
		manifests: [][]byte{crds["karpenter.sh_nodepools.yaml"], crds["karpenter.sh_nodeclaims.yaml"], crds["karpenter.k8s.aws_ec2nodeclasses.yaml"], nodeClassCRD}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		p.shutdown()
		if p.last != nil && t.Failed() {
			t.Logf("Auto Mode's Karpenter:\n%s", p.last.Logs())
		}
	})
	go p.run(ctx, done)
}

// autoModePlayer is PlayAutoMode's state, owned by its goroutine (and by
// the cleanup once that goroutine is done).
type autoModePlayer struct {
	t       testing.TB
	c       *Cluster
	s       *AWSStandIn
	cluster string
	dyn     dynamic.Interface
	// wake is signalled (without blocking) on every informer event.
	wake chan struct{}

	// running is the controller while Auto Mode is on; last the latest
	// one, whose log a failed test shows.
	running, last *Karpenter
	// manifests are the CRDs Auto Mode needs; crds those the player
	// created (not those already there).
	manifests [][]byte
	crds      []string
	// followed maps "<resource>/<mirror>/<mirror generation>" to the
	// source's generation that mirror generation was written from.
	followed map[string]int64
	// informers are the caches of NodeClasses, NodePools and
	// EC2NodeClasses, started once the CRDs exist.
	informers                          dynamicinformer.DynamicSharedInformerFactory
	nodeClasses, nodePools, ec2Classes cache.GenericLister
}

// run follows AutoModeEnabled (polled: the stand-in has no watch) and the
// informers' events until ctx ends.
func (p *autoModePlayer) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	ctx, stop := context.WithCancel(ctx)
	defer func() {
		stop() // the informers end with ctx, which Shutdown waits for
		if p.informers != nil {
			p.informers.Shutdown()
		}
	}()
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	for {
		on := p.s.AutoModeEnabled(p.cluster)
		switch {
		case on && p.running == nil:
			if err := p.enable(ctx); err != nil {
				if ctx.Err() == nil {
					p.t.Errorf("playing EKS Auto Mode for %s: %v", p.cluster, err)
				}
				return
			}
		case !on && p.running != nil:
			p.disable(ctx)
		}
		if p.running != nil {
			p.sync(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-poll.C:
		}
	}
}

// enable installs the CRDs, starts the informers (once) and the controller.
func (p *autoModePlayer) enable(ctx context.Context) error {
	for _, raw := range p.manifests {
		name, created, err := p.c.createCRD(ctx, raw)
		if err != nil {
			return fmt.Errorf("the %s CRD: %w", name, err)
		}
		if created {
			p.crds = append(p.crds, name)
		}
	}
	if p.informers == nil {
		p.informers = dynamicinformer.NewDynamicSharedInformerFactory(p.dyn, 0)
		wake := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.signal() },
			UpdateFunc: func(any, any) { p.signal() },
			DeleteFunc: func(any) { p.signal() },
		}
		for _, r := range []struct {
			gvr    schema.GroupVersionResource
			lister *cache.GenericLister
		}{{nodeClassResource, &p.nodeClasses}, {nodePoolResource, &p.nodePools}, {ec2NodeClassResource, &p.ec2Classes}} {
			inf := p.informers.ForResource(r.gvr)
			if _, err := inf.Informer().AddEventHandler(wake); err != nil {
				return err
			}
			*r.lister = inf.Lister()
		}
		p.informers.Start(ctx.Done())
		for gvr, ok := range p.informers.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("the %s cache did not sync", gvr.Resource)
			}
		}
	}
	k, err := startKarpenter(p.c, p.s, []string{"CLUSTER_NAME=" + p.cluster,
		// The ground's batch window (the managed controller's is not
		// published); the same as the Karpenter mode's ground.
		"BATCH_MAX_DURATION=2s", "BATCH_IDLE_DURATION=200ms"})
	if err != nil {
		return err
	}
	p.running, p.last = k, k
	return nil
}

func (p *autoModePlayer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// disable terminates Auto Mode's nodes through Karpenter, removes the
// mirrors, releases the NodeClasses and stops the controller.
func (p *autoModePlayer) disable(ctx context.Context) {
	if err := p.terminate(ctx); err != nil && ctx.Err() == nil {
		p.t.Errorf("disabling EKS Auto Mode for %s: %v", p.cluster, err)
	}
	p.running.proc.stop()
	p.running = nil
}

// terminate deletes the mirrors and waits (up to 2 minutes) until
// Karpenter has terminated their NodeClaims and let the EC2NodeClasses go,
// then takes autoModeFinalizer off every NodeClass.
func (p *autoModePlayer) terminate(ctx context.Context) error {
	mirrors := metav1.ListOptions{LabelSelector: autoModeSourceLabel}
	for _, r := range []schema.GroupVersionResource{nodePoolResource, ec2NodeClassResource} {
		if err := p.dyn.Resource(r).DeleteCollection(ctx, metav1.DeleteOptions{}, mirrors); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the mirror %s: %w", r.Resource, err)
		}
	}
	held := p.waitMirrorsGone(ctx, mirrors)
	// Released even when nodes are left: nothing would release them later.
	list, err := p.dyn.Resource(nodeClassResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if err := p.release(context.Background(), &list.Items[i]); err != nil {
			return err
		}
	}
	return held
}

// waitMirrorsGone waits up to 2 minutes for the mirror EC2NodeClasses to go.
func (p *autoModePlayer) waitMirrorsGone(ctx context.Context, mirrors metav1.ListOptions) error {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		left, err := p.dyn.Resource(ec2NodeClassResource).List(ctx, mirrors)
		if err != nil {
			return err
		}
		if len(left.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("EC2NodeClasses %s still held after 2m (NodeClaims left)", names(left.Items))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// shutdown ends the play at the test's end: nodes the test left go, the
// NodeClasses are released (also after an interrupted disable), the
// controller stops, and the CRDs the player created are deleted.
func (p *autoModePlayer) shutdown() {
	if p.informers != nil {
		if err := p.terminate(context.Background()); err != nil {
			p.t.Errorf("ending EKS Auto Mode for %s: %v", p.cluster, err)
		}
	}
	if p.running != nil {
		p.running.proc.stop()
		p.running = nil
	}
	for _, name := range p.crds {
		if err := p.c.deleteCRD(name); err != nil {
			p.t.Errorf("testenv: deleting the %s CRD: %v", name, err)
		}
	}
}

// sync brings the mirrors and the sources' status in line with the caches.
func (p *autoModePlayer) sync(ctx context.Context) {
	classes, err := p.nodeClasses.List(labels.Everything())
	if err != nil {
		p.t.Errorf("listing NodeClasses: %v", err)
		return
	}
	// live are the mirrors that should exist, by resource.
	live := map[string]map[string]bool{nodePoolResource.Resource: {}, ec2NodeClassResource.Resource: {}}
	for _, o := range classes {
		nc := o.(*unstructured.Unstructured)
		if nc.GetDeletionTimestamp() != nil {
			p.syncDeletedNodeClass(ctx, nc)
			continue
		}
		live[ec2NodeClassResource.Resource][nc.GetName()+autoModeMirrorSuffix] = true
		p.syncNodeClass(ctx, nc)
	}
	pools, err := p.nodePools.List(labels.Everything())
	if err != nil {
		p.t.Errorf("listing NodePools: %v", err)
		return
	}
	for _, o := range pools {
		np := o.(*unstructured.Unstructured)
		group, _, _ := unstructured.NestedString(np.Object, "spec", "template", "spec", "nodeClassRef", "group")
		kind, _, _ := unstructured.NestedString(np.Object, "spec", "template", "spec", "nodeClassRef", "kind")
		if group == nodeClassResource.Group && kind == "NodeClass" && np.GetDeletionTimestamp() == nil {
			live[nodePoolResource.Resource][np.GetName()+autoModeMirrorSuffix] = true
			p.syncNodePool(ctx, np)
		}
	}
	// Mirrors whose source went (or no longer names a NodeClass).
	for _, r := range []struct {
		lister cache.GenericLister
		gvr    schema.GroupVersionResource
	}{{p.nodePools, nodePoolResource}, {p.ec2Classes, ec2NodeClassResource}} {
		mirrors, _ := r.lister.List(labels.Everything())
		for _, o := range mirrors {
			m := o.(*unstructured.Unstructured)
			if _, mirror := m.GetLabels()[autoModeSourceLabel]; mirror && !live[r.gvr.Resource][m.GetName()] && m.GetDeletionTimestamp() == nil {
				if err := p.dyn.Resource(r.gvr).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					p.t.Errorf("deleting the mirror %s %s: %v", r.gvr.Resource, m.GetName(), err)
				}
			}
		}
	}
}

// syncNodeClass gives a NodeClass the finalizer, its mirror EC2NodeClass,
// and the mirror's Ready condition.
func (p *autoModePlayer) syncNodeClass(ctx context.Context, nc *unstructured.Unstructured) {
	if !slices.Contains(nc.GetFinalizers(), autoModeFinalizer) {
		nc = nc.DeepCopy()
		nc.SetFinalizers(append(nc.GetFinalizers(), autoModeFinalizer))
		if _, err := p.dyn.Resource(nodeClassResource).Update(ctx, nc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			p.t.Errorf("adding %s to NodeClass %s: %v", autoModeFinalizer, nc.GetName(), err)
		}
		return // the update brings an event
	}
	spec, _, _ := unstructured.NestedMap(nc.Object, "spec")
	mirror, err := p.apply(ctx, ec2NodeClassResource, p.ec2Classes, nc, "karpenter.k8s.aws/v1", "EC2NodeClass", ec2NodeClassSpec(spec))
	var ready []any
	switch {
	case err != nil:
		// The ground's own reason: Auto Mode's for a refused class is
		// not published.
		ready = []any{condition("Ready", "False", "NotAccepted", err.Error(), nc.GetGeneration())}
	case mirror == nil:
		return // not in the cache yet
	default:
		ready = p.copyConditions(ec2NodeClassResource, mirror, "Ready")
	}
	p.setStatus(ctx, nodeClassResource, nc, map[string]any{"conditions": ready})
}

// syncDeletedNodeClass deletes a deleted NodeClass's mirror and, once the
// mirror is gone (Karpenter lets it go when its NodeClaims are gone),
// releases the NodeClass.
func (p *autoModePlayer) syncDeletedNodeClass(ctx context.Context, nc *unstructured.Unstructured) {
	if !slices.Contains(nc.GetFinalizers(), autoModeFinalizer) {
		return
	}
	name := nc.GetName() + autoModeMirrorSuffix
	m, err := p.dyn.Resource(ec2NodeClassResource).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if err := p.release(ctx, nc); err != nil {
			p.t.Errorf("%v", err)
		}
	case err != nil:
		p.t.Errorf("reading EC2NodeClass %s: %v", name, err)
	case m.GetDeletionTimestamp() == nil:
		if err := p.dyn.Resource(ec2NodeClassResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			p.t.Errorf("deleting EC2NodeClass %s: %v", name, err)
		}
	}
}

// release takes autoModeFinalizer off a NodeClass.
func (p *autoModePlayer) release(ctx context.Context, nc *unstructured.Unstructured) error {
	if !slices.Contains(nc.GetFinalizers(), autoModeFinalizer) {
		return nil
	}
	nc = nc.DeepCopy()
	nc.SetFinalizers(slices.DeleteFunc(nc.GetFinalizers(), func(f string) bool { return f == autoModeFinalizer }))
	if _, err := p.dyn.Resource(nodeClassResource).Update(ctx, nc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing NodeClass %s: %w", nc.GetName(), err)
	}
	return nil
}

// syncNodePool gives a NodePool on a NodeClass its mirror and the mirror's
// status.
func (p *autoModePlayer) syncNodePool(ctx context.Context, np *unstructured.Unstructured) {
	spec, _, _ := unstructured.NestedMap(np.Object, "spec")
	mirror, err := p.apply(ctx, nodePoolResource, p.nodePools, np, "karpenter.sh/v1", "NodePool", nodePoolSpec(spec))
	status := map[string]any{}
	switch {
	case err != nil:
		status["conditions"] = []any{condition("Ready", "False", "NotAccepted", err.Error(), np.GetGeneration())}
	case mirror == nil:
		return // not in the cache yet
	default:
		status["conditions"] = p.copyConditions(nodePoolResource, mirror)
		for _, k := range []string{"nodes", "resources"} {
			if v, ok, _ := unstructured.NestedFieldCopy(mirror.Object, "status", k); ok {
				status[k] = v
			}
		}
	}
	p.setStatus(ctx, nodePoolResource, np, status)
}

// apply creates or rewrites src's mirror (name + autoModeMirrorSuffix) of
// resource r with spec, owned by src; it returns the mirror as cached, nil
// while the cache has not seen it yet.
func (p *autoModePlayer) apply(ctx context.Context, r schema.GroupVersionResource, lister cache.GenericLister, src *unstructured.Unstructured,
	apiVersion, kind string, spec map[string]any) (*unstructured.Unstructured, error) {
	// The source's generation is in the digest: a change the mirror does
	// not carry still moves the generation the mirror follows.
	raw, err := json.Marshal([]any{spec, src.GetGeneration()})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:8])
	name := src.GetName() + autoModeMirrorSuffix
	var cached *unstructured.Unstructured
	if o, err := lister.Get(name); err == nil {
		cached = o.(*unstructured.Unstructured)
		if cached.GetAnnotations()[autoModeSpecAnnotation] == digest {
			return cached, nil
		}
	}
	m := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	if cached != nil {
		m = cached.DeepCopy()
		m.Object["spec"] = spec
	}
	m.SetName(name)
	m.SetLabels(map[string]string{autoModeSourceLabel: src.GetName()})
	// Karpenter's own annotations (its hashes) stay.
	notes := m.GetAnnotations()
	if notes == nil {
		notes = map[string]string{}
	}
	notes[autoModeSpecAnnotation] = digest
	m.SetAnnotations(notes)
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: src.GetAPIVersion(), Kind: src.GetKind(), Name: src.GetName(), UID: src.GetUID()}})
	var written *unstructured.Unstructured
	if cached == nil {
		written, err = p.dyn.Resource(r).Create(ctx, m, metav1.CreateOptions{})
	} else {
		written, err = p.dyn.Resource(r).Update(ctx, m, metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		p.followed[fmt.Sprintf("%s/%s/%d", r.Resource, name, written.GetGeneration())] = src.GetGeneration()
	case !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err):
		return nil, fmt.Errorf("%s %s for %s: %w", kind, name, src.GetName(), err)
	}
	return cached, nil
}

// setStatus writes status onto o unless it is already there.
func (p *autoModePlayer) setStatus(ctx context.Context, r schema.GroupVersionResource, o *unstructured.Unstructured, status map[string]any) {
	conds, _ := status["conditions"].([]any)
	if len(conds) == 0 {
		delete(status, "conditions")
	}
	// A condition that keeps its status keeps its transition time.
	old, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		c := c.(map[string]any)
		for _, oc := range old {
			if oc := oc.(map[string]any); oc["type"] == c["type"] && oc["status"] == c["status"] {
				c["lastTransitionTime"] = oc["lastTransitionTime"]
			}
		}
	}
	if equality.Semantic.DeepEqual(o.Object["status"], status) || (len(status) == 0 && o.Object["status"] == nil) {
		return
	}
	o = o.DeepCopy()
	o.Object["status"] = status
	if _, err := p.dyn.Resource(r).UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		p.t.Errorf("writing the status of %s %s: %v", r.Resource, o.GetName(), err)
	}
}

// ec2NodeClassSpec is the EC2NodeClass that launches what a NodeClass spec
// describes.
func ec2NodeClassSpec(nc map[string]any) map[string]any {
	out := map[string]any{
		"role":             nc["role"],
		"amiSelectorTerms": []any{map[string]any{"alias": "bottlerocket@latest"}},
	}
	for _, k := range []string{"subnetSelectorTerms", "securityGroupSelectorTerms", "tags"} {
		if v, ok := nc[k]; ok {
			out[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	if terms, ok := nc["capacityReservationSelectorTerms"].([]any); ok {
		var crs []any
		for _, t := range terms {
			term := runtime.DeepCopyJSONValue(t).(map[string]any)
			if owner, ok := term["owner"]; ok {
				delete(term, "owner")
				term["ownerID"] = owner
			}
			crs = append(crs, term)
		}
		out["capacityReservationSelectorTerms"] = crs
	}
	// Bottlerocket keeps ephemeral storage on its data volume, /dev/xvdb,
	// beside a 4 GiB OS volume (Karpenter's Bottlerocket block devices).
	if es, ok := nc["ephemeralStorage"].(map[string]any); ok {
		data := map[string]any{"volumeType": "gp3", "volumeSize": es["size"]}
		for _, k := range []string{"iops", "throughput"} {
			if v, ok := es[k]; ok {
				data[k] = v
			}
		}
		if key, ok := es["kmsKeyID"]; ok {
			data["encrypted"], data["kmsKeyID"] = true, key
		}
		out["blockDeviceMappings"] = []any{
			map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{"volumeType": "gp3", "volumeSize": "4Gi"}},
			map[string]any{"deviceName": "/dev/xvdb", "ebs": data},
		}
	}
	return out
}

// nodePoolSpec is the NodePool on the mirror EC2NodeClass that makes the
// nodes an Auto Mode NodePool spec describes.
func nodePoolSpec(np map[string]any) map[string]any {
	out := runtime.DeepCopyJSONValue(np).(map[string]any)
	tmpl, _, _ := unstructured.NestedMap(out, "template")
	if tmpl == nil {
		tmpl = map[string]any{}
	}
	meta, _ := tmpl["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	lbls, _ := meta["labels"].(map[string]any)
	if lbls == nil {
		lbls = map[string]any{}
	}
	lbls[autoModeComputeTypeLabel] = "auto"
	meta["labels"] = lbls
	tmpl["metadata"] = meta
	spec, _ := tmpl["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	ref, _ := spec["nodeClassRef"].(map[string]any)
	spec["nodeClassRef"] = map[string]any{"group": ec2NodeClassResource.Group, "kind": "EC2NodeClass", "name": fmt.Sprint(ref["name"]) + autoModeMirrorSuffix}
	if reqs, ok := spec["requirements"].([]any); ok {
		for _, r := range reqs {
			req, _ := r.(map[string]any)
			if key, ok := req["key"].(string); ok {
				if rest, ok := strings.CutPrefix(key, "eks.amazonaws.com/"); ok && slices.Contains(autoModeLabels, rest) {
					req["key"] = "karpenter.k8s.aws/" + rest
				}
			}
		}
	}
	tmpl["spec"] = spec
	out["template"] = tmpl
	return out
}

// copyConditions copies a mirror's conditions (only the types in only, if
// any), each observedGeneration made the source's generation that the
// mirror's observed generation was written from (0 if unknown: from
// before this player).
func (p *autoModePlayer) copyConditions(r schema.GroupVersionResource, mirror *unstructured.Unstructured, only ...string) []any {
	conds, _, _ := unstructured.NestedSlice(mirror.Object, "status", "conditions")
	var out []any
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || (len(only) > 0 && !slices.Contains(only, fmt.Sprint(m["type"]))) {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		m["observedGeneration"] = p.followed[fmt.Sprintf("%s/%s/%d", r.Resource, mirror.GetName(), observed)]
		out = append(out, m)
	}
	return out
}

func condition(typ, status, reason, message string, generation int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"observedGeneration": generation, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func names(items []unstructured.Unstructured) []string {
	var out []string
	for _, o := range items {
		out = append(out, o.GetName())
	}
	return out
}
