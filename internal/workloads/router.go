package workloads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Router is everything that defines one llmd-router deployment in front of a fleet.
type Router struct {
	Name, Namespace string
	Image           string
	Replicas        int32
	// Target is the fleet as llmd_model_fleet reports it.
	Target RouterTarget
	// Scorers are the picker's weighted sum (config.DefaultScorers: the cost-aware mix).
	Scorers  []config.Scorer
	Limits   RouterLimits
	LogLevel string
	Service  Exposure
	// APIKeyVersion, when set, makes the router require the API key kept in
	// the Secret APIKeySecretName (see APIKeySecret); a new version rolls
	// the pods, which read the key once at start.
	APIKeyVersion string
	// APIKeys are more accepted keys, by digest, each naming its requests'
	// tenant and highest class (serve --api-keys-file).
	APIKeys   []RouterAPIKey
	Resources RouterResources
	// NodeSelector and Tolerations place the pods (the system node group by default).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Annotations go on the Deployment (the provider keeps its settings there).
	Annotations map[string]string
	// Gateway, when set, makes the router its gateway's endpoint picker
	// (gateway mode) instead of its clients' proxy; see RouterGateway.
	Gateway *RouterGateway
}

// RouterGateway is gateway mode: the router serves the Gateway API Inference
// Extension's Endpoint Picker Protocol (gRPC ext_proc, TLS with a
// self-signed certificate) to the team's own gateway, and only that: its
// HTTP port keeps /healthz, /readyz and /metrics (serve --picker-only), so
// clients reach the fleet through the gateway, which also authenticates
// them. An InferencePool over the fleet's pods, in the fleet's namespace,
// names the router's Service as its endpoint picker; the router follows
// its pods through that pool.
type RouterGateway struct {
	// Pool is the InferencePool's name.
	Pool string
	// Port is the picker's gRPC port, on the pods and on the Service.
	Port int
	// FailureMode is the pool's endpointPickerRef.failureMode: FailClose
	// (GIE's default: requests fail while no picker answers) or FailOpen
	// (the gateway then picks a pod itself).
	FailureMode string
	// MatchLabels are the pool's selector: the fleet's pod labels.
	MatchLabels map[string]string
}

// Gateway mode's ports on the router pods. PickerHealthPort serves the
// picker's gRPC health services in plaintext for the kubelet's gRPC probes,
// which speak no TLS; it is not on the Service.
const (
	DefaultPickerPort = 9002
	PickerHealthPort  = 9003
)

// InferencePoolGVK is the Gateway API Inference Extension's pool (GA).
var InferencePoolGVK = kube.Ref{Group: "inference.networking.k8s.io", Version: "v1", Kind: "InferencePool"}

// RouterLimits are serve's admission and shutdown flags.
type RouterLimits struct {
	// MaxInFlightPerPod is each pod's capacity, counted over every router
	// replica (0: no cap).
	MaxInFlightPerPod int
	// MaxPendingPerPod bounds the requests a replica keeps on one pod that
	// have yet to answer a byte (0: no bound). Either limit turns the queue
	// on.
	MaxPendingPerPod int
	// MaxPendingPrefillPerPod bounds, for the classes below the highest,
	// the uncached prompt tokens of a replica's unanswered requests on one
	// pod (0: no bound).
	MaxPendingPrefillPerPod int
	// PrefillReserve is the share of the fleet's pods, rounded down, the
	// prefill bound keeps open to the higher classes (0: none).
	PrefillReserve float64
	MaxQueue       int
	// KVOutputReserve turns the KV bound on (0: off) with each request's
	// output counted up to this many tokens; KVHeadroom is the share of a
	// pod's KV cache the lowest class leaves free (0: serve's default).
	KVOutputReserve int
	KVHeadroom      float64
	// QueueTimeout is the time-to-live of a class that sets none.
	QueueTimeout time.Duration
	// Classes are the priority classes, highest first (none: the router's
	// default high, standard, low); DefaultClass is a request's class when
	// it names none (empty: the router's default).
	Classes      []RouterClass
	DefaultClass string
	// TenantShare is the share of MaxQueue one tenant may hold in one class
	// (0: the router's default).
	TenantShare float64
	// Drain is how long open requests (streams) may take after SIGTERM.
	Drain time.Duration
}

// RouterClass is one priority class: its name and how long its requests
// may wait for a slot (0: QueueTimeout).
type RouterClass struct {
	Name string
	TTL  time.Duration
}

// RouterAPIKey is one accepted API key, by the hex SHA-256 of the key (the
// key itself is never rendered), with the tenant its requests count
// against (empty: the x-llmd-tenant header's) and its requests' class,
// also the highest they may name (empty: the default class, no ceiling).
type RouterAPIKey struct {
	SHA256, Tenant, Class string
}

// RouterResources are one router pod's requests and limits.
type RouterResources struct {
	CPU, Memory, MemoryLimit string
}

// Router pod layout. RouterPort is where serve listens in the pod; the
// claim is mounted at MountPath, as in the fleet's pods, so the fleet's
// tokenizer paths resolve the same way.
const (
	RouterPort       = 8000
	RouterConfigDir  = "/etc/llmd-router"
	RouterConfigFile = "router.yaml"
	// RouterAPIKeysFile, beside the configuration file, lists APIKeys.
	RouterAPIKeysFile = "api-keys"
	ConfigChecksumKey = "llmd.dev/config-checksum"
	// APIKeyVersionKey on the pod template rolls the pods to a new API key.
	APIKeyVersionKey = "llmd.dev/api-key-version"
	// routerPreStop is how long a terminating pod keeps serving before
	// SIGTERM, so endpoints and load balancers stop sending to it first.
	routerPreStop = 5
	// routerGOGC is the router's GOGC (see deployment).
	routerGOGC = "400"
)

// Labels are on every object of the router; the selector is a stable subset.
func (r Router) Labels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "llmd-router",
		"app.kubernetes.io/instance":   r.Name,
		"app.kubernetes.io/component":  "router",
		"app.kubernetes.io/part-of":    "llmd",
		"app.kubernetes.io/managed-by": "llmd",
		"llmd.dev/router":              r.Name,
	}
}

// Selector picks the router's pods.
func (r Router) Selector() map[string]string {
	return map[string]string{"llmd.dev/router": r.Name, "app.kubernetes.io/component": "router"}
}

// Config is the router's configuration file, built with the router's own
// types, defaulted and validated by the router's own code.
func (r Router) Config() (*config.Config, error) {
	t := r.Target
	k := &config.Kubernetes{Namespace: t.Namespace, Selector: t.Selector}
	if r.Gateway != nil {
		// The pool's own selector and target ports choose the pods.
		k = &config.Kubernetes{Namespace: t.Namespace, InferencePool: r.Gateway.Pool}
	}
	c := &config.Config{
		Model:     t.ServedModel,
		Listen:    fmt.Sprintf(":%d", RouterPort),
		BlockSize: t.BlockSize,
		Discovery: config.Discovery{
			Kubernetes: k,
			Ports:      config.Ports{HTTP: t.HTTPPort, KVEvents: t.KVEventsPort, Replay: t.ReplayPort},
			Topic:      t.Topic,
		},
		Scoring:     config.Scoring{Scorers: r.Scorers},
		Peers:       r.peers(),
		Autoscaling: r.autoscalingConfig(),
	}
	switch {
	case t.tokenizerInS3():
		c.Tokenizer = config.Tokenizer{JSON: t.TokenizerPath, Config: t.TokenizerConfigPath}
	case t.TokenizerPath != "":
		c.Tokenizer = config.Tokenizer{JSON: path.Join(MountPath, t.TokenizerPath), Config: path.Join(MountPath, t.TokenizerConfigPath)}
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if _, err := scoring.FromConfig(c.Scoring); err != nil {
		return nil, err
	}
	return c, nil
}

// ConfigFile is the rendered configuration file and the checksum of
// everything the router's ConfigMap carries (the file, and the API keys'
// digests when there are any), which rolls the pods when it changes.
func (r Router) ConfigFile() ([]byte, string, error) {
	cfg, err := r.Config()
	if err != nil {
		return nil, "", err
	}
	yaml, err := cfg.Marshal()
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	h.Write(yaml)
	if keys := r.apiKeysFile(); keys != "" {
		h.Write([]byte{0})
		h.Write([]byte(keys))
	}
	return yaml, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Validate checks the spec, naming the Terraform attribute at fault.
func (r Router) Validate() error {
	if r.Image == "" {
		return fmt.Errorf("image: must be set")
	}
	if r.Target.Namespace == "" || r.Target.Selector == "" {
		return fmt.Errorf("fleet: namespace and selector must be set (pass llmd_model_fleet.<name>.router_target)")
	}
	if r.Target.tokenizerInS3() {
		if !strings.HasPrefix(r.Target.TokenizerConfigPath, "s3://") || r.Target.S3Region == "" {
			return fmt.Errorf("fleet: tokenizer_path %s is in S3, so tokenizer_config_path must be too and s3_region must be set (pass llmd_model_fleet.<name>.router_target)", r.Target.TokenizerPath)
		}
	} else if r.Target.TokenizerPath != "" && r.Target.ClaimName == "" {
		return fmt.Errorf("fleet.claim_name: must be set with fleet.tokenizer_path: the tokenizer files are read from that claim")
	}
	if r.Target.TokenizerPath != "" && !r.Target.tokenizerInS3() && r.Namespace != r.Target.Namespace {
		return fmt.Errorf("namespace: %q is not fleet.namespace %q: the router reads the tokenizer files from the fleet's claim %s, "+
			"and a claim can only be mounted in its own namespace; leave namespace unset (the fleet's)", r.Namespace, r.Target.Namespace, r.Target.ClaimName)
	}
	switch r.Service.Type {
	case "ClusterIP", "LoadBalancer":
	default:
		return fmt.Errorf("service.type: %q is not ClusterIP or LoadBalancer", r.Service.Type)
	}
	if err := r.Service.validate("service", r.APIKeyVersion != "" || len(r.APIKeys) > 0, "set api_key (with api_key_version) or api_keys"); err != nil {
		return err
	}
	if err := r.validateFlow(); err != nil {
		return err
	}
	if err := r.validateGateway(); err != nil {
		return err
	}
	for _, q := range []struct{ name, v string }{{"resources.cpu", r.Resources.CPU}, {"resources.memory", r.Resources.Memory},
		{"resources.memory_limit", r.Resources.MemoryLimit}} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return fmt.Errorf("%s: %q is not a Kubernetes quantity (e.g. \"1\", \"500m\", \"1Gi\")", q.name, q.v)
		}
	}
	_, err := r.Config()
	return err
}

// Args follow the image's entrypoint (`llmd-router serve`): the serve
// flags besides the config file's content.
func (r Router) Args() []string {
	args := []string{"--config", path.Join(RouterConfigDir, RouterConfigFile),
		"--log-level", r.LogLevel,
		"--max-in-flight-per-pod", fmt.Sprint(r.Limits.MaxInFlightPerPod),
		"--max-pending-per-pod", fmt.Sprint(r.Limits.MaxPendingPerPod),
		"--max-queue", fmt.Sprint(r.Limits.MaxQueue),
		"--queue-timeout", r.Limits.QueueTimeout.String(),
		"--shutdown-timeout", r.Limits.Drain.String(),
	}
	args = append(args, r.flowArgs()...)
	if r.Gateway != nil {
		args = append(args, "--picker-listen", fmt.Sprintf(":%d", r.Gateway.Port),
			"--picker-health-listen", fmt.Sprintf(":%d", PickerHealthPort), "--picker-only")
	}
	return args
}

// ServiceMonitorKind is the prometheus-operator type of the router's scrape config.
var ServiceMonitorKind = kube.Ref{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// Objects are the router's objects in apply order. withServiceMonitor adds
// the ServiceMonitor (only when the cluster serves its CRD).
func (r Router) Objects(withServiceMonitor bool) ([]kube.Object, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	yaml, checksum, err := r.ConfigFile()
	if err != nil {
		return nil, err
	}
	labels := r.Labels()
	acs := []any{corev1ac.Namespace(r.Namespace).WithLabels(map[string]string{"app.kubernetes.io/managed-by": "llmd"})}
	if r.Target.Namespace != r.Namespace {
		acs = append(acs, corev1ac.Namespace(r.Target.Namespace).WithLabels(map[string]string{"app.kubernetes.io/managed-by": "llmd"}))
	}
	acs = append(acs,
		corev1ac.ServiceAccount(r.Name, r.Namespace).WithLabels(labels),
		// Discovery watches the fleet's pods, in the fleet's namespace, and nothing else.
		rbacv1ac.Role(r.Name, r.Target.Namespace).WithLabels(labels).WithRules(r.roleRules()...),
		rbacv1ac.RoleBinding(r.Name, r.Target.Namespace).WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(r.Name)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(r.Name).WithNamespace(r.Namespace)),
		corev1ac.ConfigMap(r.Name, r.Namespace).WithLabels(labels).WithData(r.configMapData(yaml)),
		r.deployment(labels, checksum),
		r.service(labels),
		policyv1ac.PodDisruptionBudget(r.Name, r.Namespace).WithLabels(labels).
			WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMaxUnavailable(intstr.FromInt32(1)).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector()))),
		r.peerPolicy(labels),
	)
	acs = append(acs, r.peerRBAC(labels)...)
	acs = append(acs, r.autoscalingObjects(labels)...)
	if r.Gateway != nil {
		// After the Service it names as its endpoint picker.
		acs = append(acs, r.inferencePool(labels))
	}
	if withServiceMonitor {
		acs = append(acs, r.serviceMonitor(labels))
	}
	objs := make([]kube.Object, 0, len(acs))
	for _, ac := range acs {
		o, err := kube.FromApplyConfiguration(ac)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

func (r Router) deployment(labels map[string]string, checksum string) any {
	probe := func(p string, period, failures int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(p).WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(period).WithFailureThreshold(failures).WithTimeoutSeconds(2)
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName("config").WithMountPath(RouterConfigDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(r.Name)),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("64Mi"))),
	}
	if r.Target.TokenizerPath != "" && !r.Target.tokenizerInS3() {
		// The fleet's own claim, read-only: the router tokenizes with exactly the engines' tokenizer files.
		mounts = append(mounts, corev1ac.VolumeMount().WithName("weights").WithMountPath(MountPath).WithReadOnly(true))
		volumes = append(volumes, corev1ac.Volume().WithName("weights").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(r.Target.ClaimName).WithReadOnly(true)))
	}
	limit := resource.MustParse(r.Resources.MemoryLimit)
	env := []*corev1ac.EnvVarApplyConfiguration{corev1ac.EnvVar().WithName("GOGC").WithValue(routerGOGC),
		corev1ac.EnvVar().WithName("GOMEMLIMIT").WithValue(strconv.FormatInt(limit.Value()/10*9, 10))}
	if r.Target.tokenizerInS3() {
		// The router reads the tokenizer files from the bucket with its
		// service account's Pod Identity, signing for the bucket's region.
		env = append(env, corev1ac.EnvVar().WithName("AWS_REGION").WithValue(r.Target.S3Region))
	}
	podAnnotations := map[string]string{ConfigChecksumKey: checksum}
	if r.APIKeyVersion != "" {
		// Not optional: a missing Secret stops the pod (CreateContainerConfigError)
		// rather than starting a router that lets anyone in.
		env = append(env, corev1ac.EnvVar().WithName(apiKeyEnv).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(r.APIKeySecretName()).WithKey("api-key"))))
		podAnnotations[APIKeyVersionKey] = r.APIKeyVersion
	}
	container := corev1ac.Container().WithName("router").WithImage(r.Image).
		WithArgs(r.Args()...).
		// The Go runtime's collector, tuned for a router that allocates a
		// request's worth (its body, text, ids and keys: about 1.5 MB for a
		// 220 KB chat) per decision: GOGC 400 runs it a quarter as often,
		// which takes a warm long request's p99 from 3-5 ms to about 2 ms
		// (BENCHMARKS.md), and GOMEMLIMIT at 90% of the memory limit makes
		// it collect harder before the kernel would kill the pod.
		WithEnv(env...).
		WithPorts(r.containerPorts()...).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(r.Resources.CPU), corev1.ResourceMemory: resource.MustParse(r.Resources.Memory)}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: limit})).
		WithVolumeMounts(mounts...).
		WithReadinessProbe(r.probe(probe, "/readyz", HealthReadiness, 2, 2)).
		WithLivenessProbe(r.probe(probe, "/healthz", HealthLiveness, 10, 3)).
		// Keep serving while endpoints and load balancers drop the pod; SIGTERM then drains open streams.
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(routerPreStop)))).
		// Pod Security "restricted".
		WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).WithRunAsUser(65532).WithRunAsGroup(65532).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	pod := corev1ac.PodSpec().
		WithServiceAccountName(r.Name).
		// Discovery authenticates with the pod's ServiceAccount token (in-cluster config).
		WithAutomountServiceAccountToken(true).
		WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(int64(routerPreStop)+int64(r.Limits.Drain.Seconds())+10).
		WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithFSGroup(65532).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container).
		WithVolumes(volumes...).
		// Spread over nodes and zones as a preference, never a condition: a
		// node that cannot take a pod still counts as a hostname domain
		// (nodeTaintsPolicy defaults to Ignore: a cordoned node being
		// drained in a node group upgrade, or an untolerated GPU node on a
		// cluster made elsewhere, counts with zero replicas), so
		// DoNotSchedule would leave a replica Pending beside a free node.
		// A one-node system group is a plan warning instead.
		WithTopologySpreadConstraints(
			corev1ac.TopologySpreadConstraint().WithMaxSkew(1).WithTopologyKey(corev1.LabelHostname).
				WithWhenUnsatisfiable(corev1.ScheduleAnyway).WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector())),
			corev1ac.TopologySpreadConstraint().WithMaxSkew(1).WithTopologyKey(corev1.LabelTopologyZone).
				WithWhenUnsatisfiable(corev1.ScheduleAnyway).WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector())))
	if len(r.NodeSelector) > 0 {
		pod = pod.WithNodeSelector(r.NodeSelector)
	}
	for _, t := range r.Tolerations {
		pod = pod.WithTolerations(toleration(t))
	}
	d := appsv1ac.Deployment(r.Name, r.Namespace).WithLabels(labels)
	if len(r.Annotations) > 0 {
		d = d.WithAnnotations(r.Annotations)
	}
	return d.WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(r.Replicas).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(r.Selector())).
		WithStrategy(appsv1ac.DeploymentStrategy().WithType("RollingUpdate").WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
			WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromInt32(1)))).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
			// A new configuration rolls the pods: serve reads its file once at start.
			WithAnnotations(podAnnotations).
			WithSpec(pod)))
}

func (r Router) service(labels map[string]string) any {
	svc := r.Service.service(r.Name, r.Namespace, labels, r.Selector())
	if r.Gateway != nil {
		svc.Spec.WithPorts(corev1ac.ServicePort().WithName("grpc-ext-proc").WithPort(int32(r.Gateway.Port)).
			WithTargetPort(intstr.FromString("grpc-ext-proc")).WithAppProtocol(PickerAppProtocol))
	}
	return svc
}

// APIKeySecretName is the Secret holding the router's API key.
func (r Router) APIKeySecretName() string { return r.Name + "-api-key" }

// apiKeyEnv is the variable serve reads the API key from (its --api-key
// flag's LLMD_ environment form): a flag would show in ps and in the pod spec.
const apiKeyEnv = "LLMD_API_KEY"

// APIKeySecret is the Secret carrying the API key to the router pods. It is
// applied only when the key is given (a write-only input, never in state)
// and is no part of the rendered hash or of drift.
func (r Router) APIKeySecret(key string) any {
	return corev1ac.Secret(r.APIKeySecretName(), r.Namespace).WithLabels(r.Labels()).WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"api-key": []byte(strings.TrimSpace(key))})
}

func (r Router) serviceMonitor(labels map[string]string) any {
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": map[string]any{"name": r.Name, "namespace": r.Namespace, "labels": labels},
		"spec": map[string]any{
			"selector":  metav1.LabelSelector{MatchLabels: r.Selector()},
			"endpoints": []any{map[string]any{"port": "http", "path": "/metrics", "interval": "15s"}},
		},
	}
}

// URL is the in-cluster address of the router Service's OpenAI-compatible
// front; empty in gateway mode, where clients go through the gateway.
func (r Router) URL() string {
	if r.Gateway != nil {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", r.Name, r.Namespace, r.Service.Port)
}

// tokenizerInS3 says the tokenizer files are in the fleet's bucket (S3
// weights), which the router reads itself instead of mounting a claim.
func (t RouterTarget) tokenizerInS3() bool { return strings.HasPrefix(t.TokenizerPath, "s3://") }
