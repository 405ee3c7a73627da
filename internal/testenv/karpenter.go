package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
)

// KarpenterVersion is the Karpenter release the test ground runs: the AWS
// provider (github.com/aws/karpenter-provider-aws) at this tag, whose go
// directive this machine's Go meets (1.15.x needs a newer Go).
const KarpenterVersion = "1.14.0"

// karpenterModule is the AWS provider's module: its kwok build, its CRDs
// (pkg/apis/crds) and its Helm chart (charts/karpenter).
const karpenterModule = "github.com/aws/karpenter-provider-aws"

// karpenterPaths returns Karpenter's binary and its module's source
// directory, building the binary on first use (about 4.5 CPU-minutes cold).
//
// The binary is the AWS provider's own kwok build (its kwok/ directory): the
// real Karpenter controllers and the real AWS cloud provider (EC2NodeClass,
// AMI and subnet discovery, instance types and offerings, pricing, capacity
// reservations, instance profiles), with one part replaced by the project
// itself: its EC2 client's launch calls (CreateFleet, RunInstances,
// DescribeInstances, TerminateInstances, launch templates) are served in
// process and make each launched instance a Node object that kwok runs.
// Every other AWS call goes to the AWS stand-in (and moto behind it).
func karpenterPaths() (bin, moduleDir string, err error) {
	cache, err := CacheDir()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(cache, "karpenter-"+KarpenterVersion)
	bin = filepath.Join(dir, "kwok")
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil
		}
		cmd := exec.Command("go", partBuild("install", "", karpenterModule+"/kwok@v"+KarpenterVersion)...)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("installing Karpenter %s (kwok build): %w\n%s", KarpenterVersion, err, out)
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	out, err := exec.Command("go", "mod", "download", "-json", karpenterModule+"@v"+KarpenterVersion).Output()
	if err != nil {
		return "", "", fmt.Errorf("locating the Karpenter module source: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", "", fmt.Errorf("locating the Karpenter module source: no Dir in %s", out)
	}
	return bin, mod.Dir, nil
}

// karpenterModuleDir is the Karpenter module's source directory, with its
// binary built; a test without them is skipped (failed under CI=true).
func karpenterModuleDir(t testing.TB) string {
	t.Helper()
	_, dir, err := karpenterPaths()
	if err != nil {
		unavailable(t, "Karpenter "+KarpenterVersion, err, "needs the Go module proxy (run .ci/run or make testenv once)")
	}
	return dir
}

// KarpenterCRDs are the manifests of the CRDs Karpenter's chart installs
// (its crds/ directory, which in the repository links to pkg/apis/crds).
func KarpenterCRDs(t testing.TB) map[string][]byte {
	t.Helper()
	dir := karpenterModuleDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "pkg", "apis", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testenv: no Karpenter CRDs under %s (%v)", dir, err)
	}
	crds := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crds[filepath.Base(f)] = b
	}
	return crds
}

// InstallKarpenterCRDs installs Karpenter's CRDs for the test's duration.
func (c *Cluster) InstallKarpenterCRDs(t testing.TB) {
	t.Helper()
	for name, raw := range KarpenterCRDs(t) {
		c.installCRD(t, strings.TrimSuffix(name, ".yaml"), raw)
	}
}

// Karpenter is a running Karpenter controller (KarpenterVersion's kwok
// build) on the test's control plane.
type Karpenter struct {
	proc *process
}

// StartKarpenter runs Karpenter for the EKS cluster clusterName as its
// Deployment would, with env on top (the container's env: CLUSTER_NAME,
// INTERRUPTION_QUEUE, FEATURE_GATES and the like). Its AWS calls go to the
// stand-in, which first publishes EKS's optimized AL2023 and Bottlerocket
// AMI parameters for the control plane's Kubernetes version (naming x86_64
// images moto holds), as AWS publishes them in every region. The CRDs must
// be installed; the process stops when the test ends.
func StartKarpenter(t testing.TB, c *Cluster, s *AWSStandIn, env ...string) *Karpenter {
	t.Helper()
	karpenterModuleDir(t)
	k, err := startKarpenter(c, s, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.proc.stop)
	return k
}

// startKarpenter runs Karpenter with env (later entries win) beneath the
// ground's own: the kubeconfig, the namespace, free ports, no leader
// election, and the stand-in's endpoint and credentials.
func startKarpenter(c *Cluster, s *AWSStandIn, env []string) (*Karpenter, error) {
	bin, _, err := karpenterPaths()
	if err != nil {
		return nil, err
	}
	if err := s.publishEKSAMIs(); err != nil {
		return nil, fmt.Errorf("testenv: publishing the EKS AMI parameters: %w", err)
	}
	metrics, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	health, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(env), "KUBECONFIG="+c.Kubeconfig, "SYSTEM_NAMESPACE=kube-system", "DISABLE_LEADER_ELECTION=true",
		fmt.Sprintf("METRICS_PORT=%d", metrics), fmt.Sprintf("HEALTH_PROBE_PORT=%d", health), "LOG_LEVEL=debug")
	for k, v := range s.moto.Env() {
		if k == "AWS_ENDPOINT_URL" {
			v = s.URL
		}
		all = append(all, k+"="+v)
	}
	p, err := startProcess("karpenter", bin, nil, all)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(2*time.Minute, httpOK(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))); err != nil {
		p.stop()
		return nil, fmt.Errorf("testenv: Karpenter not ready: %w\n%s", err, p.logTail(40))
	}
	return &Karpenter{proc: p}, nil
}

// KarpenterChart is Karpenter's own Helm chart at KarpenterVersion as its
// release packages it: the module's charts/karpenter, with the CRDs of
// pkg/apis/crds in crds/ (in the repository crds/ links there, and the
// module zip drops links) and KarpenterVersion as its version and
// appVersion (the tag's Chart.yaml still names the release before: the
// release stamps the version when it packages the chart). Serve it with
// StartChartRepo.
func KarpenterChart(t testing.TB) *chart.Chart {
	t.Helper()
	dir := karpenterModuleDir(t)
	ch, err := loader.LoadDir(filepath.Join(dir, "charts", "karpenter"))
	if err != nil {
		t.Fatalf("testenv: loading Karpenter's chart: %v", err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = KarpenterVersion, KarpenterVersion
	for name, raw := range KarpenterCRDs(t) {
		ch.Files = append(ch.Files, &chart.File{Name: "crds/" + name, Data: raw})
	}
	return ch
}

// PlayKarpenter plays the controller of a Karpenter Helm release as its
// Deployment namespace/name declares it, for the test's duration: once the
// Deployment exists, one Karpenter (StartKarpenter; the chart's replicas
// elect one leader) runs with the literal env of its container (cluster,
// endpoint, interruption queue, batching, feature gates), then extra; when
// the Deployment is deleted (an uninstall), the controller stops, as its
// pods would. A controller that cannot start fails the test.
func PlayKarpenter(t testing.TB, c *Cluster, s *AWSStandIn, namespace, name string, extra ...string) {
	t.Helper()
	karpenterModuleDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// running is the controller while the Deployment exists; last the
	// latest one, whose log a failed test shows.
	var running, last *Karpenter
	t.Cleanup(func() {
		cancel()
		<-done
		if running != nil {
			running.proc.stop()
		}
		if last != nil && t.Failed() {
			t.Logf("Karpenter:\n%s", last.Logs())
		}
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			switch {
			case err == nil && d.DeletionTimestamp == nil && running == nil:
				var env []string
				for _, ctr := range d.Spec.Template.Spec.Containers {
					for _, e := range ctr.Env {
						if e.ValueFrom == nil {
							env = append(env, e.Name+"="+e.Value)
						}
					}
				}
				k, err := startKarpenter(c, s, append(env, extra...))
				if err != nil {
					t.Errorf("playing Karpenter's Deployment %s/%s: %v", namespace, name, err)
					return
				}
				running, last = k, k
			case (apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil)) && running != nil:
				running.proc.stop()
				running = nil
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// Logs is the tail of Karpenter's log, for failure messages.
func (k *Karpenter) Logs() string { return k.proc.logTail(60) }

// publishEKSAMIs publishes the x86_64 AMI parameters of EKS's AL2023 and
// Bottlerocket images for KubernetesVersion's minor, standard and NVIDIA,
// naming two of moto's x86_64 images (one for each variant: Karpenter keys
// an alias's images by ID, so a variant needs an image of its own).
func (s *AWSStandIn) publishEKSAMIs() error {
	client := ec2.New(ec2.Options{Region: Region, BaseEndpoint: aws.String(s.moto.URL),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
	out, err := client.DescribeImages(context.Background(), &ec2.DescribeImagesInput{
		Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}, {Name: aws.String("state"), Values: []string{"available"}}}})
	if err != nil {
		return err
	}
	if len(out.Images) < 2 {
		return fmt.Errorf("moto holds %d x86_64 images, want 2", len(out.Images))
	}
	minor := strings.Join(strings.Split(strings.TrimPrefix(KubernetesVersion, "v"), ".")[:2], ".")
	standard, nvidia := aws.ToString(out.Images[0].ImageId), aws.ToString(out.Images[1].ImageId)
	s.PublishEKSAMI(eksAMIPrefix+minor+"/amazon-linux-2023/x86_64/standard/recommended/image_id", standard)
	s.PublishEKSAMI(eksAMIPrefix+minor+"/amazon-linux-2023/x86_64/nvidia/recommended/image_id", nvidia)
	s.PublishEKSAMI(bottlerocketAMIPrefix+"aws-k8s-"+minor+"/x86_64/latest/image_id", standard)
	s.PublishEKSAMI(bottlerocketAMIPrefix+"aws-k8s-"+minor+"-nvidia/x86_64/latest/image_id", nvidia)
	return nil
}
