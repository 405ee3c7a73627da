package awsinfra

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/fsx"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
)

// Services whose endpoint can be overridden, in the order the docs list them.
// "events" is EventBridge and "sqs" SQS: Karpenter's interruption queue and
// the rules feeding it.
var Services = []string{"ec2", "eks", "events", "fsx", "iam", "s3", "servicequotas", "sqs", "sts"}

// Settings are the provider-level AWS settings, free of Terraform types.
type Settings struct {
	// Region is the AWS region; empty falls back to the environment and shared config.
	Region string
	// Profile names a shared-config profile; empty uses the default chain.
	Profile string
	// SharedConfigFiles and SharedCredentialsFiles replace the SDK's default
	// shared config and credentials files (~/.aws/config, ~/.aws/credentials).
	// HCP Terraform's dynamic credentials arrive as a generated shared config
	// file per configuration (role_arn and web_identity_token_file).
	SharedConfigFiles      []string
	SharedCredentialsFiles []string
	// WebIdentity, when set, takes credentials from STS AssumeRoleWithWebIdentity
	// instead of the default chain; AssumeRole then assumes its role from them.
	WebIdentity *WebIdentity
	// AssumeRole, when set, wraps the base credentials in an STS AssumeRole provider.
	AssumeRole *AssumeRole
	// Endpoints maps a service name from Services to a base URL overriding its endpoint.
	Endpoints map[string]string
	// DefaultTags are applied to every object the provider creates.
	DefaultTags map[string]string
	// MaxRetries is the maximum number of attempts per API call; 0 keeps the SDK default.
	MaxRetries int
	// RetryMode is "standard" or "adaptive"; empty keeps the SDK default (standard).
	RetryMode string
	// UserAgent is appended to every request's User-Agent, e.g. "terraform-provider-llmd/0.1.0".
	UserAgent string
}

// AssumeRole configures role assumption through STS.
type AssumeRole struct {
	RoleARN     string
	SessionName string
	ExternalID  string
	Duration    time.Duration
}

// WebIdentity configures role assumption with an OIDC token (STS
// AssumeRoleWithWebIdentity). The token is a secret: it is never logged or
// put in an error.
type WebIdentity struct {
	RoleARN     string
	SessionName string
	// Token is the OIDC token itself; TokenFile a file holding it, read at
	// every refresh (the issuer may rotate it). Exactly one is set.
	Token     string
	TokenFile string
	Duration  time.Duration
}

// GetIdentityToken returns the inline token or the token file's content
// (stscreds.IdentityTokenRetriever).
func (w WebIdentity) GetIdentityToken() ([]byte, error) {
	if w.TokenFile == "" {
		return []byte(w.Token), nil
	}
	b, err := os.ReadFile(w.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("assume_role_with_web_identity.web_identity_token_file: %w", err)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

// Validate checks settings that the SDK would only reject at the first call,
// naming the field and the fix.
func (s Settings) Validate() error {
	known := map[string]bool{}
	for _, svc := range Services {
		known[svc] = true
	}
	names := make([]string, 0, len(s.Endpoints))
	for name := range s.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known[name] {
			return fmt.Errorf("endpoints.%s: unknown service; endpoints can be overridden for %v", name, Services)
		}
		u, err := url.Parse(s.Endpoints[name])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoints.%s: %q is not an absolute http(s) URL; give e.g. https://eks.us-west-2.amazonaws.com", name, s.Endpoints[name])
		}
	}
	switch s.RetryMode {
	case "", string(aws.RetryModeStandard), string(aws.RetryModeAdaptive):
	default:
		return fmt.Errorf("retry_mode: %q is not supported; use \"standard\" or \"adaptive\"", s.RetryMode)
	}
	if s.MaxRetries < 0 {
		return fmt.Errorf("max_retries: %d is negative; use 0 for the SDK default or a positive attempt count", s.MaxRetries)
	}
	if s.AssumeRole != nil && s.AssumeRole.RoleARN == "" {
		return fmt.Errorf("assume_role.role_arn: required when assume_role is set")
	}
	if w := s.WebIdentity; w != nil {
		switch {
		case w.RoleARN == "":
			return fmt.Errorf("assume_role_with_web_identity.role_arn: required when assume_role_with_web_identity is set")
		case (w.Token == "") == (w.TokenFile == ""):
			return fmt.Errorf("assume_role_with_web_identity: set exactly one of web_identity_token and web_identity_token_file")
		}
	}
	for _, f := range append(append([]string{}, s.SharedConfigFiles...), s.SharedCredentialsFiles...) {
		if f == "" {
			return fmt.Errorf("shared_config_files, shared_credentials_files: an empty path; give the files' paths, e.g. \"~/.aws/config\"")
		}
	}
	return nil
}

// LoadConfig builds the aws.Config every client shares: the default credential
// chain (or a profile), optional role assumption, retries and the user agent.
func LoadConfig(ctx context.Context, s Settings) (aws.Config, error) {
	if err := s.Validate(); err != nil {
		return aws.Config{}, err
	}
	if _, err := pollIntervalFromEnv(); err != nil {
		return aws.Config{}, err
	}
	opts := []func(*config.LoadOptions) error{}
	if s.Region != "" {
		opts = append(opts, config.WithRegion(s.Region))
	}
	if s.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(s.Profile))
	}
	if len(s.SharedConfigFiles) > 0 {
		opts = append(opts, config.WithSharedConfigFiles(expandHome(s.SharedConfigFiles)))
	}
	if len(s.SharedCredentialsFiles) > 0 {
		opts = append(opts, config.WithSharedCredentialsFiles(expandHome(s.SharedCredentialsFiles)))
	}
	if s.RetryMode != "" {
		opts = append(opts, config.WithRetryMode(aws.RetryMode(s.RetryMode)))
	}
	if s.MaxRetries > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(s.MaxRetries))
	}
	if name, version, ok := strings.Cut(s.UserAgent, "/"); ok {
		// A product token of its own: the SDK's app ID would turn the "/" into "-".
		opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{awsmiddleware.AddUserAgentKeyValue(name, version)}))
	} else if s.UserAgent != "" {
		opts = append(opts, config.WithAppID(s.UserAgent))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("region: no AWS region configured; set region in the provider block or AWS_REGION")
	}
	if w := s.WebIdentity; w != nil {
		// AssumeRoleWithWebIdentity is an unsigned call: it needs no base credentials.
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = s.endpoint("sts") })
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(stsClient, w.RoleARN, *w, func(o *stscreds.WebIdentityRoleOptions) {
			// Empty: the SDK names the session from the time.
			o.RoleSessionName = w.SessionName
			if w.Duration > 0 {
				o.Duration = w.Duration
			}
		}))
	}
	if ar := s.AssumeRole; ar != nil {
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = s.endpoint("sts") })
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, ar.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			if ar.SessionName != "" {
				o.RoleSessionName = ar.SessionName
			}
			if ar.ExternalID != "" {
				o.ExternalID = aws.String(ar.ExternalID)
			}
			if ar.Duration > 0 {
				o.Duration = ar.Duration
			}
		}))
	}
	if s.MaxRetries > 0 || s.RetryMode != "" {
		cfg.Retryer = func() aws.Retryer { return retryerFor(s.RetryMode, s.MaxRetries) }
	}
	return cfg, nil
}

// expandHome resolves a leading "~/" as the AWS provider does for these paths.
func expandHome(paths []string) []string {
	home, err := os.UserHomeDir()
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		if rest, ok := strings.CutPrefix(p, "~/"); ok && err == nil {
			out[i] = filepath.Join(home, rest)
		}
	}
	return out
}

// retryerFor builds the retryer of a mode. The attempt count is overridden
// only when maxAttempts is set: both retryers otherwise keep the SDK's
// documented default of 3 attempts (retry.DefaultMaxAttempts; "Retries and
// Timeouts", AWS SDK for Go v2 developer guide), so `retry_mode` alone never
// turns retries off.
func retryerFor(mode string, maxAttempts int) aws.Retryer {
	var r aws.Retryer = retry.NewStandard()
	if mode == string(aws.RetryModeAdaptive) {
		r = retry.NewAdaptiveMode()
	}
	if maxAttempts > 0 {
		r = retry.AddWithMaxAttempts(r, maxAttempts)
	}
	return r
}

// Clients are the service clients the provider uses, each honouring its endpoint override.
type Clients struct {
	EC2           *ec2.Client
	EKS           *eks.Client
	Events        *eventbridge.Client
	FSx           *fsx.Client
	IAM           *iam.Client
	S3            *s3.Client
	ServiceQuotas *servicequotas.Client
	SQS           *sqs.Client
	STS           *sts.Client
	// Config is the shared configuration the clients were built from (region, credentials).
	Config aws.Config
	// DefaultTags are the provider's default_tags, merged into every create.
	DefaultTags map[string]string
	// PollInterval is how often waiters poll; zero means the default (see PollIntervalEnv).
	PollInterval time.Duration
	// Log, when set, receives progress lines of long operations.
	Log Logger
	// Settings are the settings the configuration was loaded from: another
	// process given them (the provider binary's eks-token command) signs as
	// this provider does.
	Settings Settings
}

// NewClients builds every service client from one configuration.
func NewClients(cfg aws.Config, s Settings) *Clients {
	// LoadConfig has rejected a malformed value, so the error is always nil here.
	poll, _ := pollIntervalFromEnv()
	return &Clients{
		EC2:           ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = s.endpoint("ec2") }),
		EKS:           eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = s.endpoint("eks") }),
		Events:        eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = s.endpoint("events") }),
		FSx:           fsx.NewFromConfig(cfg, func(o *fsx.Options) { o.BaseEndpoint = s.endpoint("fsx") }),
		IAM:           iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = s.endpoint("iam") }),
		S3:            s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = s.endpoint("s3") }),
		ServiceQuotas: servicequotas.NewFromConfig(cfg, func(o *servicequotas.Options) { o.BaseEndpoint = s.endpoint("servicequotas") }),
		SQS:           sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = s.endpoint("sqs") }),
		STS:           sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = s.endpoint("sts") }),
		Config:        cfg,
		DefaultTags:   s.DefaultTags,
		PollInterval:  poll,
		Settings:      s,
	}
}

// endpoint is the override for a service, or nil to let the SDK resolve it.
func (s Settings) endpoint(service string) *string {
	if ep := s.Endpoints[service]; ep != "" {
		return aws.String(ep)
	}
	return nil
}
