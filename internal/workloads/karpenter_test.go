package workloads

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func validPool() GPUNodePool {
	return GPUNodePool{Name: "llmd-gpu", NodeRole: "c-us-west-2-karp-node", AMIFamily: "al2023", SubnetIDs: []string{"subnet-b", "subnet-a"},
		SecurityGroupIDs: []string{"sg-1"}, DiskGiB: 200, InstanceTypes: []string{"g5.xlarge"}, CapacityTypes: []string{CapacityOnDemand},
		Labels: map[string]string{"llmd.dev/pool": "gpu"}, Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		GPULimit: 8, ConsolidateAfter: 5 * time.Minute, Tags: map[string]string{"llmd.dev/owner": "c"}}
}

// TestGPUNodePoolObjects checks what Karpenter is told: the class by ids
// (no discovery tags needed), the family alias, the disk on the right
// device per family, a reservation as a selector term, and the pool's
// type, capacity types, labels, taints, GPU limit and consolidation.
func TestGPUNodePoolObjects(t *testing.T) {
	p := validPool()
	p.CapacityTypes, p.ReservationID = []string{CapacityReserved, CapacityOnDemand}, "cr-0abc"
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Kind != EC2NodeClassKind || objs[1].Kind != NodePoolKind {
		t.Fatalf("objects %v, want the EC2NodeClass then the NodePool", objs)
	}
	class, pool := objs[0].Body().Object, objs[1].Body().Object
	expectFields(t, "EC2NodeClass", class, map[string]any{
		"spec.role":                                  "c-us-west-2-karp-node",
		"spec.amiSelectorTerms.0.alias":              "al2023@latest",
		"spec.subnetSelectorTerms.0.id":              "subnet-a",
		"spec.subnetSelectorTerms.1.id":              "subnet-b",
		"spec.securityGroupSelectorTerms.0.id":       "sg-1",
		"spec.blockDeviceMappings.0.deviceName":      "/dev/xvda",
		"spec.blockDeviceMappings.0.ebs.volumeSize":  "200Gi",
		"spec.capacityReservationSelectorTerms.0.id": "cr-0abc",
		"spec.metadataOptions.httpTokens":            "required",
		"spec.tags.llmd\\.dev/owner":                 "c",
	})
	expectFields(t, "NodePool", pool, map[string]any{
		"spec.template.spec.nodeClassRef.name":          "llmd-gpu",
		"spec.template.spec.requirements.0.values.0":    "g5.xlarge",
		"spec.template.spec.requirements.1.values.0":    CapacityReserved,
		"spec.template.spec.requirements.1.values.1":    CapacityOnDemand,
		"spec.template.metadata.labels.llmd\\.dev/pool": "gpu",
		"spec.template.spec.taints.0.effect":            "NoSchedule",
		"spec.limits.nvidia\\.com/gpu":                  "8",
		"spec.disruption.consolidationPolicy":           "WhenEmptyOrUnderutilized",
		"spec.disruption.consolidateAfter":              "5m0s",
	})

	p = validPool()
	p.AMIFamily = "bottlerocket"
	objs, err = p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	class = objs[0].Body().Object
	if root, data := field(t, class, "spec.blockDeviceMappings.0.ebs.volumeSize"), field(t, class, "spec.blockDeviceMappings.1.ebs.volumeSize"); root != "4Gi" || data != "200Gi" {
		t.Errorf("Bottlerocket volumes: root %v, data %v; want the OS on 4Gi and disk_size on the data volume", root, data)
	}
}

// TestGPUNodePoolAutoMode checks the Auto Mode variant: EKS's NodeClass
// (no AMI, no block devices or metadata options, which Auto Mode owns; the
// disk as ephemeral storage), and a NodePool that names it.
func TestGPUNodePoolAutoMode(t *testing.T) {
	p := validPool()
	p.AutoMode, p.AMIFamily = true, ""
	p.CapacityTypes, p.ReservationTags = []string{CapacityReserved}, map[string]string{"team": "ml"}
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Group != AutoModeGroup || objs[0].Kind != NodeClassKind || objs[1].Kind != NodePoolKind {
		t.Fatalf("objects %v, want EKS's NodeClass then the NodePool", objs)
	}
	class, pool := objs[0].Body().Object, objs[1].Body().Object
	expectFields(t, "NodeClass", class, map[string]any{
		"spec.role":                                         "c-us-west-2-karp-node",
		"spec.subnetSelectorTerms.0.id":                     "subnet-a",
		"spec.securityGroupSelectorTerms.0.id":              "sg-1",
		"spec.ephemeralStorage.size":                        "200Gi",
		"spec.capacityReservationSelectorTerms.0.tags.team": "ml",
		"spec.amiSelectorTerms":                             nil,
		"spec.blockDeviceMappings":                          nil,
		"spec.metadataOptions":                              nil,
	})
	expectFields(t, "NodePool", pool, map[string]any{
		"spec.template.spec.nodeClassRef.group": AutoModeGroup,
		"spec.template.spec.nodeClassRef.kind":  NodeClassKind,
		"spec.template.spec.nodeClassRef.name":  "llmd-gpu",
	})
}

func TestGPUNodePoolRefusesWhatKarpenterCannotMake(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*GPUNodePool)
		want string
	}{
		"al2":                  {func(p *GPUNodePool) { p.AMIFamily = "al2" }, `AMIFamily "al2"`},
		"reserved without one": {func(p *GPUNodePool) { p.CapacityTypes = []string{CapacityReserved} }, "reserved needs ReservationID"},
		"reservation not used": {func(p *GPUNodePool) { p.ReservationTags = map[string]string{"team": "ml"} }, "needs the reserved capacity type"},
		"bad reservation id":   {func(p *GPUNodePool) { p.CapacityTypes, p.ReservationID = []string{CapacityReserved}, "r-1" }, `ReservationID "r-1"`},
		"unknown capacity":     {func(p *GPUNodePool) { p.CapacityTypes = []string{"ON_DEMAND"} }, `capacity type "ON_DEMAND"`},
		"no subnets":           {func(p *GPUNodePool) { p.SubnetIDs = nil }, "SubnetIDs"},
		"no GPUs":              {func(p *GPUNodePool) { p.GPULimit = 0 }, "GPULimit 0"},
		"AMI in Auto Mode":     {func(p *GPUNodePool) { p.AutoMode = true }, "runs its own AMI"},
	} {
		t.Run(name, func(t *testing.T) {
			p := validPool()
			tc.edit(&p)
			if _, err := p.Objects(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// expectFields checks obj's fields at the dotted paths of want (see field).
func expectFields(t *testing.T, kind string, obj map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		if got := field(t, obj, path); got != w {
			t.Errorf("%s %s = %v, want %v", kind, path, got, w)
		}
	}
}

// field reads a dotted path (list indexes as numbers, "\\." for a dot in a key).
func field(t *testing.T, obj map[string]any, path string) any {
	t.Helper()
	parts := strings.Split(strings.ReplaceAll(path, "\\.", "\x00"), ".")
	var cur any = obj
	for _, p := range parts {
		p = strings.ReplaceAll(p, "\x00", ".")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, ch := range p {
				i = i*10 + int(ch-'0')
			}
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	if n, ok := cur.(int64); ok {
		return n
	}
	return cur
}
