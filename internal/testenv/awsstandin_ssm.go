// AWS's public SSM parameters for the EKS optimized AMIs, which moto 5.2.1
// does not hold (it carries only the Amazon Linux and ECS ones) and whose
// /aws/ prefix no account may write. EKS publishes the recommended image
// of each Kubernetes version, AMI family, architecture and variant under
// /aws/service/eks/optimized-ami/<version>/amazon-linux-2023/<arch>/<variant>/recommended/image_id
// ("Retrieve recommended Amazon Linux AMI IDs", Amazon EKS User Guide), and
// Bottlerocket's under
// /aws/service/bottlerocket/aws-k8s-<version>[-nvidia]/<arch>/latest/image_id
// ("Retrieve recommended Bottlerocket AMI IDs", same guide); Karpenter
// resolves the EC2NodeClass aliases al2023@latest and bottlerocket@latest
// through them. The stand-in answers GetParameter for the ones a test
// publishes (images the test ground registered in moto), and
// ParameterNotFound for the others, as SSM does for a name it does not hold.

package testenv

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// eksAMIPrefix and bottlerocketAMIPrefix are where EKS publishes its
// optimized AMIs' parameters.
const (
	eksAMIPrefix          = "/aws/service/eks/optimized-ami/"
	bottlerocketAMIPrefix = "/aws/service/bottlerocket/"
)

// PublishEKSAMI makes the public parameter name resolve to imageID.
func (s *AWSStandIn) PublishEKSAMI(name, imageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.publicParams == nil {
		s.publicParams = map[string]string{}
	}
	s.publicParams[name] = imageID
}

// serveSSMPublic answers GetParameter for the EKS AMI parameters.
func (s *AWSStandIn) serveSSMPublic(w http.ResponseWriter, req awsRequest) bool {
	if req.service != "ssm" || req.op != "GetParameter" {
		return false
	}
	var in struct{ Name string }
	_ = json.Unmarshal(req.body, &in)
	if !strings.HasPrefix(in.Name, eksAMIPrefix) && !strings.HasPrefix(in.Name, bottlerocketAMIPrefix) {
		return false
	}
	s.mu.Lock()
	id, ok := s.publicParams[in.Name]
	s.mu.Unlock()
	if !ok {
		writeAWSError(w, req.service, http.StatusBadRequest, "ParameterNotFound", "")
		return true
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "String", "Value": id, "Version": 1,
		"DataType": "aws:ec2:image", "LastModifiedDate": float64(time.Now().Unix()), "ARN": "arn:aws:ssm:" + Region + "::parameter" + in.Name}})
	return true
}
