package testenv

import (
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
)

// Moto is a running moto_server: the AWS APIs the provider calls, on loopback.
type Moto struct {
	// URL is the base endpoint for every service, e.g. http://127.0.0.1:40123.
	URL string
}

// Region, AccessKey and SecretKey are what tests configure aws-sdk-go-v2 with
// against moto (any static credentials work; these are the conventional ones).
const (
	Region    = "us-west-2"
	AccessKey = "test"
	SecretKey = "test"
)

var (
	motoOnce sync.Once
	motoInst *Moto
	motoErr  error
)

// StartMoto returns the test binary's moto_server, started on first use, with
// its state reset so each test starts from an empty account. Tests that share
// it must not run in parallel with each other.
func StartMoto(t testing.TB) *Moto {
	t.Helper()
	motoOnce.Do(func() { motoInst, motoErr = startMoto() })
	if motoErr != nil {
		unavailable(t, "moto_server", motoErr, "pip install 'moto[server]' (5.x) so that moto_server is on PATH")
	}
	if err := motoInst.Reset(); err != nil {
		t.Fatalf("testenv: resetting moto: %v", err)
	}
	return motoInst
}

func startMoto() (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server not on PATH: %w", err)
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	// Managed policies (AmazonEKSClusterPolicy and friends) exist only with this setting.
	p, err := startProcess("moto", bin, []string{"-H", "127.0.0.1", "-p", fmt.Sprint(port)}, []string{"MOTO_IAM_LOAD_MANAGED_POLICIES=true"})
	if err != nil {
		return nil, err
	}
	registerStop(p)
	m := &Moto{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	return m, p.waitReady(30*time.Second, httpOK(http.DefaultClient, m.URL+"/moto-api/"))
}

// Reset empties every moto backend.
func (m *Moto) Reset() error {
	resp, err := http.Post(m.URL+"/moto-api/reset", "application/json", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /moto-api/reset: %s", resp.Status)
	}
	return nil
}

// Env is the environment that points the AWS SDK default chain at moto; tests
// set it with t.Setenv before the provider or awsinfra loads its configuration.
func (m *Moto) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     AccessKey,
		"AWS_SECRET_ACCESS_KEY": SecretKey,
		"AWS_REGION":            Region,
		"AWS_ENDPOINT_URL":      m.URL,
		// Keep the SDK away from the instance metadata service and shared files of the machine.
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	}
}

// SetEnv applies Env for the duration of the test.
func (m *Moto) SetEnv(t testing.TB) {
	t.Helper()
	for k, v := range m.Env() {
		t.Setenv(k, v)
	}
}
