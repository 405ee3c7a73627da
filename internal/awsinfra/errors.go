package awsinfra

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// errorCode is the AWS error code of err, or "" when it is not an API error.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// isCode reports whether err is an API error with one of codes.
func isCode(err error, codes ...string) bool {
	code := errorCode(err)
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// isNotFound covers the not-found codes of the services the provider uses,
// so deletes and finds can treat an already-gone part as done. EKS sometimes
// reports a missing cluster as "ClientException: No cluster found for name"
// (terraform-provider-aws eks/cluster.go findClusterByName treats it so).
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	code := errorCode(err)
	return code == "ResourceNotFoundException" || code == "NoSuchEntity" ||
		strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, "NotFound") ||
		(code == "ClientException" && strings.Contains(errorMessage(err), "No cluster found for name"))
}

// isNotImplemented is how an emulator or a partition without the API
// answers: a route that does not exist (404/501 that is not a resource's
// not-found), or a 500 page that is no AWS error document (moto's answer to
// an action it lacks). Preflight checks skip with a reason instead of failing.
func isNotImplemented(err error) bool {
	var httpErr interface{ HTTPStatusCode() int }
	if errors.As(err, &httpErr) {
		switch httpErr.HTTPStatusCode() {
		case 404, 501:
			return !isNotFound(err)
		case 500:
			var apiErr smithy.APIError
			return !errors.As(err, &apiErr)
		}
	}
	return isCode(err, "NotImplemented", "NotImplementedException", "UnknownOperationException", "InvalidAction")
}

// errorMessage is the service's own message, without the SDK's operation prefix.
func errorMessage(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	return err.Error()
}

// iamPropagationMessages are the InvalidParameterException messages EKS gives
// while a new IAM role or its policies have not reached every IAM endpoint
// yet; they pass within seconds to a minute, so creates retry them.
var iamPropagationMessages = []string{
	"does not exist",                      // roleArn, arn:aws:iam::…:role/…, does not exist
	"could not be assumed",                // Role could not be assumed because the trusted entity is not correct
	"Error in role params",                // a role not yet readable by EKS
	"doesn't have the Amazon EKS Managed", // the managed policies are attached but not yet visible
	"IAM role's policy must include",      // ec2:DescribeSubnets and friends not yet visible
}

// isIAMPropagation reports whether err is EKS rejecting a role that IAM has
// not finished propagating: only messages that name a role, so "subnet …
// does not exist" is no propagation delay and fails at once.
func isIAMPropagation(err error) bool {
	if !isCode(err, "InvalidParameterException") {
		return false
	}
	msg := errorMessage(err)
	if !strings.Contains(strings.ToLower(msg), "role") {
		return false
	}
	for _, m := range iamPropagationMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
