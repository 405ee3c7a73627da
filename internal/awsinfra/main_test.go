package awsinfra

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// standInClients are clients on a stand-in in front of a fresh moto, polling
// every few milliseconds so injected states pass quickly.
func standInClients(t *testing.T) (*Clients, *testenv.AWSStandIn) {
	t.Helper()
	standIn := testenv.StartAWSStandIn(t, testenv.StartMoto(t))
	return clientsAt(t, standIn.URL), standIn
}

// motoOnlyClients talk to a fresh moto directly, without the stand-in.
func motoOnlyClients(t *testing.T) *Clients {
	t.Helper()
	return clientsAt(t, testenv.StartMoto(t).URL)
}

func clientsAt(t *testing.T, url string) *Clients {
	t.Helper()
	return clientsIn(t, url, testenv.Region)
}

// clientsIn are clients at url acting in region.
func clientsIn(t *testing.T, url, region string) *Clients {
	t.Helper()
	endpoints := map[string]string{}
	for _, svc := range Services {
		endpoints[svc] = url
	}
	t.Setenv("AWS_ACCESS_KEY_ID", testenv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testenv.SecretKey)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	s := Settings{Region: region, Endpoints: endpoints, MaxRetries: 1, DefaultTags: map[string]string{"team": "inference"}}
	cfg, err := LoadConfig(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClients(cfg, s)
	c.PollInterval = 5 * time.Millisecond
	c.Log = func(_ context.Context, msg string, fields map[string]any) { t.Log(msg, fields) }
	return c
}

// testSpec is a small cluster with the product's defaults.
func testSpec(name string) ClusterSpec {
	return ClusterSpec{
		Name: name, KubernetesVersion: "1.33",
		Network:  NetworkSpec{VPCCIDR: "10.0.0.0/16", AvailabilityZones: []string{"us-west-2a", "us-west-2b"}},
		Endpoint: EndpointAccess{Public: true, Private: true, PublicCIDRs: []string{"0.0.0.0/0"}},
		GPU: NodeGroupSpec{Name: "gpu", InstanceType: "g5.xlarge", AMIType: "AL2023_x86_64_NVIDIA", CapacityType: "ON_DEMAND", DiskSize: 200,
			DesiredSize: 8, MinSize: 8, MaxSize: 8, Labels: map[string]string{"llmd.dev/pool": "gpu"},
			Taints: []Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: "NO_SCHEDULE"}}},
		System: NodeGroupSpec{Name: "system", InstanceType: "m6i.4xlarge", AMIType: "AL2023_x86_64_STANDARD", CapacityType: "ON_DEMAND", DiskSize: 100,
			DesiredSize: 1, MinSize: 1, MaxSize: 1},
		Tags: map[string]string{"env": "test"},
	}
}
