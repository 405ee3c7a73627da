// Capacity reservations, which moto 5.2.1 does not implement at all (its
// EC2 backend has no DescribeCapacityReservations; its launch templates
// keep a CapacityReservationSpecification as opaque data and its EKS node
// groups launch nothing). The stand-in holds the reservations a test
// arranges, answers DescribeCapacityReservations from them, and launches a
// node group made from a launch template that names a reservation as EC2
// does, at its hardest: instances beyond the free count fail or run
// On-Demand as the template's preference says, and a Capacity Block takes
// instances only inside its window.

package testenv

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CapacityReservation is a reservation the stand-in holds: an On-Demand
// Capacity Reservation, or a Capacity Block for ML (Block) with its window.
type CapacityReservation struct {
	ID           string
	InstanceType string
	Zone         string
	Total        int
	// Available is the free count; instances a node group takes come off it.
	Available int
	Block     bool
	// Targeted: only launches that name the reservation run in it
	// (instance match criteria targeted); open ones also take launches with
	// preference open.
	Targeted bool
	// Start and End bound a Capacity Block's window; zero for an ODCR.
	Start, End time.Time
	Tags       map[string]string
}

// state is the reservation's state now: a Capacity Block is scheduled
// before its start, active inside its window, expired after ("When a
// Capacity Block expires ... The Capacity Block's state changes to expired
// when it reaches its end date", EC2 API reference CapacityBlock and
// CapacityBlockExtension).
func (r *CapacityReservation) state(now time.Time) string {
	switch {
	case !r.Start.IsZero() && now.Before(r.Start):
		return "scheduled"
	case !r.End.IsZero() && !now.Before(r.End):
		return "expired"
	}
	return "active"
}

// standInCapacity is the reservations and what node groups took from them.
type standInCapacity struct {
	reservations map[string]*CapacityReservation
	// taken is, per node group key, the reservation and how many of its
	// instances the group holds; onDemand how many run outside it.
	taken    map[string]reservationUse
	onDemand map[string]int
}

type reservationUse struct {
	id string
	n  int
}

// capacity is the stand-in's capacity state; the caller holds s.mu.
func (s *AWSStandIn) capacity() *standInCapacity {
	c := &s.capacityState
	if c.reservations == nil {
		c.reservations, c.taken, c.onDemand = map[string]*CapacityReservation{}, map[string]reservationUse{}, map[string]int{}
	}
	return c
}

// AddCapacityReservation arranges a reservation, as buying a Capacity Block
// or creating an ODCR outside Terraform would.
func (s *AWSStandIn) AddCapacityReservation(r CapacityReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Tags = cloneTags(r.Tags)
	s.capacity().reservations[r.ID] = &r
}

// ReservationUse is how many instances of a node group run in its
// reservation and how many outside it, On-Demand.
func (s *AWSStandIn) ReservationUse(cluster, nodegroup string) (inReservation, onDemand int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := "nodegroup/" + cluster + "/" + nodegroup
	return s.capacity().taken[key].n, s.capacity().onDemand[key]
}

// ReservationAvailable is the reservation's free count.
func (s *AWSStandIn) ReservationAvailable(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.capacity().reservations[id]; r != nil {
		return r.Available
	}
	return -1
}

func cloneTags(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// serveCapacity answers DescribeCapacityReservations; false for other calls.
func (s *AWSStandIn) serveCapacity(w http.ResponseWriter, req awsRequest) bool {
	if req.op != "DescribeCapacityReservations" {
		return false
	}
	form, _ := url.ParseQuery(string(req.body))
	var ids []string
	filters := map[string][]string{}
	for i := 1; ; i++ {
		id := form.Get("CapacityReservationId." + strconv.Itoa(i))
		if id == "" {
			break
		}
		ids = append(ids, id)
	}
	for i := 1; ; i++ {
		name := form.Get("Filter." + strconv.Itoa(i) + ".Name")
		if name == "" {
			break
		}
		for j := 1; ; j++ {
			v := form.Get("Filter." + strconv.Itoa(i) + ".Value." + strconv.Itoa(j))
			if v == "" {
				break
			}
			filters[name] = append(filters[name], v)
		}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.capacity().reservations
	// An id EC2 does not know is an error, not an empty answer (EC2 API
	// reference, error codes: InvalidCapacityReservationId.NotFound).
	for _, id := range ids {
		if all[id] == nil {
			writeAWSError(w, "ec2", http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '"+id+"' does not exist")
			return true
		}
	}
	var items []string
	var keys []string
	for id := range all {
		keys = append(keys, id)
	}
	sort.Strings(keys)
	for _, id := range keys {
		r := all[id]
		if len(ids) > 0 && !slices.Contains(ids, id) || !matchesFilters(r, r.state(now), filters) {
			continue
		}
		items = append(items, reservationXML(r, now))
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>stand-in</requestId><capacityReservationSet>%s</capacityReservationSet></DescribeCapacityReservationsResponse>`,
		strings.Join(items, ""))
	return true
}

func matchesFilters(r *CapacityReservation, state string, filters map[string][]string) bool {
	for name, values := range filters {
		var have string
		switch {
		case name == "instance-type":
			have = r.InstanceType
		case name == "state":
			have = state
		case name == "availability-zone":
			have = r.Zone
		case strings.HasPrefix(name, "tag:"):
			v, ok := r.Tags[strings.TrimPrefix(name, "tag:")]
			if !ok {
				return false
			}
			have = v
		default:
			continue
		}
		if !slices.Contains(values, have) {
			return false
		}
	}
	return true
}

func reservationXML(r *CapacityReservation, now time.Time) string {
	esc := func(v string) string {
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte(v))
		return b.String()
	}
	kind, criteria := "default", "open"
	if r.Block {
		kind = "capacity-block"
	}
	if r.Targeted || r.Block {
		criteria = "targeted"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<item><capacityReservationId>%s</capacityReservationId><ownerId>123456789012</ownerId><instanceType>%s</instanceType><instancePlatform>Linux/UNIX</instancePlatform>"+
		"<availabilityZone>%s</availabilityZone><tenancy>default</tenancy><totalInstanceCount>%d</totalInstanceCount><availableInstanceCount>%d</availableInstanceCount>"+
		"<state>%s</state><instanceMatchCriteria>%s</instanceMatchCriteria><reservationType>%s</reservationType>",
		esc(r.ID), esc(r.InstanceType), esc(r.Zone), r.Total, r.Available, r.state(now), criteria, kind)
	if !r.Start.IsZero() {
		fmt.Fprintf(&b, "<startDate>%s</startDate>", r.Start.UTC().Format(time.RFC3339))
	}
	if !r.End.IsZero() {
		fmt.Fprintf(&b, "<endDate>%s</endDate><endDateType>limited</endDateType>", r.End.UTC().Format(time.RFC3339))
	}
	b.WriteString("<tagSet>")
	var keys []string
	for k := range r.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", esc(k), esc(r.Tags[k]))
	}
	b.WriteString("</tagSet></item>")
	return b.String()
}

// launchTemplateReservation is what a launch template version says about
// reservations, as moto keeps it.
type launchTemplateReservation struct {
	Preference string `xml:"launchTemplateVersionSet>item>launchTemplateData>capacityReservationSpecification>capacityReservationPreference"`
	Target     string `xml:"launchTemplateVersionSet>item>launchTemplateData>capacityReservationSpecification>capacityReservationTarget>capacityReservationId"`
	Market     string `xml:"launchTemplateVersionSet>item>launchTemplateData>instanceMarketOptions>marketType"`
}

// launchIntoReservation launches a new node group's instances as EC2 does
// for its launch template. Instances go into a reservation only in its
// zone (EC2 user guide "Launch instances into an existing Capacity
// Reservation": matching instance type, platform, zone and tenancy, enough
// available capacity, the active state), and each takes one of its free
// instances ("Launching an instance into a Capacity Reservation reduces its
// available capacity by the number of instances launched"). The rest, per
// the template (EC2 API reference, CapacityReservationSpecification):
// capacity-reservations-only or a named target "will fail to launch",
// open "runs as an On-Demand Instance". A Capacity Block never falls back
// and launches nothing outside its window ("For Capacity Blocks, EC2 Fleet
// will not fallback to launching On-Demand Instances"; "If you make
// requests ... to launch into a Capacity Block that hasn't started yet, you
// will receive an Insufficient Capacity Error", EC2 user guide "Tutorial:
// Configure your EC2 Fleet to launch instances into Capacity Blocks").
// EKS reports the launches that failed as the node group's
// AsgInstanceLaunchFailures, CREATE_FAILED (as noCapacity does). The
// caller holds no lock.
func (s *AWSStandIn) launchIntoReservation(r *http.Request, req awsRequest) {
	var in struct {
		NodegroupName  string   `json:"nodegroupName"`
		InstanceTypes  []string `json:"instanceTypes"`
		Subnets        []string `json:"subnets"`
		LaunchTemplate *struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"launchTemplate"`
		Scaling struct {
			Desired int `json:"desiredSize"`
		} `json:"scalingConfig"`
	}
	if json.Unmarshal(req.body, &in) != nil || in.LaunchTemplate == nil || len(in.InstanceTypes) == 0 {
		return
	}
	form := url.Values{"Action": {"DescribeLaunchTemplateVersions"}}
	if in.LaunchTemplate.ID != "" {
		form.Set("LaunchTemplateId", in.LaunchTemplate.ID)
	} else {
		form.Set("LaunchTemplateName", in.LaunchTemplate.Name)
	}
	if in.LaunchTemplate.Version != "" {
		form.Set("LaunchTemplateVersion.1", in.LaunchTemplate.Version)
	}
	var lt launchTemplateReservation
	if s.ec2Call(r, form, &lt) != nil {
		return
	}
	zones := s.subnetZones(r, in.Subnets)
	key := "nodegroup/" + req.cluster + "/" + in.NodegroupName
	want := in.Scaling.Desired
	now := time.Now()
	s.mu.Lock()
	c := s.capacity()
	var res *CapacityReservation
	switch {
	case lt.Target != "":
		res = c.reservations[lt.Target]
	case lt.Preference == "open":
		// Any open reservation with matching attributes takes them.
		for _, id := range sortedReservationIDs(c.reservations) {
			if o := c.reservations[id]; !o.Targeted && !o.Block && o.InstanceType == in.InstanceTypes[0] && slices.Contains(zones, o.Zone) && o.state(now) == "active" {
				res = o
				break
			}
		}
	case lt.Preference == "" || lt.Preference == "none":
		s.mu.Unlock()
		return
	}
	usable := res != nil && res.InstanceType == in.InstanceTypes[0] && slices.Contains(zones, res.Zone) && res.state(now) == "active"
	got := 0
	if usable {
		got = min(want, res.Available)
		res.Available -= got
		c.taken[key] = reservationUse{id: res.ID, n: got}
	}
	left := want - got
	fallBack := lt.Preference == "open" && lt.Market != "capacity-block"
	if fallBack {
		c.onDemand[key] = left
	}
	s.mu.Unlock()
	if left == 0 || fallBack {
		return
	}
	why := fmt.Sprintf("There is not enough free capacity in capacity reservation %s for %d more instance(s) of %s", lt.Target, left, in.InstanceTypes[0])
	switch {
	case res == nil:
		why = "capacity reservation " + lt.Target + " does not exist"
	case res.state(now) != "active":
		why = fmt.Sprintf("Capacity Block %s is %s; it accepts instances only from %s to %s", res.ID, res.state(now), res.Start.UTC().Format(time.RFC3339), res.End.UTC().Format(time.RFC3339))
	case !slices.Contains(zones, res.Zone):
		why = fmt.Sprintf("capacity reservation %s is in %s, not in the node group's zones %v", res.ID, res.Zone, zones)
	}
	msg := "Could not launch On-Demand Instances. InsufficientInstanceCapacity - " + why + ". Launching EC2 instance failed."
	s.inject(key, "CREATE_FAILED", -1, []HealthIssue{{Code: "AsgInstanceLaunchFailures", Message: msg, ResourceIDs: []string{"eks-" + in.NodegroupName + "-asg"}}})
}

// releaseReservation gives a deleted node group's instances back to its
// reservation: a terminated instance frees its place ("the available
// capacity in your Capacity Block will update to show another instance
// available", EC2 user guide "Launch instances using Capacity Blocks").
func (s *AWSStandIn) releaseReservation(req awsRequest) {
	key := "nodegroup/" + req.cluster + "/" + req.nodegroup
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capacity()
	if use, ok := c.taken[key]; ok {
		if r := c.reservations[use.id]; r != nil {
			r.Available += use.n
		}
		delete(c.taken, key)
	}
	delete(c.onDemand, key)
}

func sortedReservationIDs(m map[string]*CapacityReservation) []string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// subnetZones are the zones of subnets, as moto reports them.
func (s *AWSStandIn) subnetZones(r *http.Request, subnets []string) []string {
	form := url.Values{"Action": {"DescribeSubnets"}}
	for i, sn := range subnets {
		form.Set("SubnetId."+strconv.Itoa(i+1), sn)
	}
	var out struct {
		Zones []string `xml:"subnetSet>item>availabilityZone"`
	}
	if s.ec2Call(r, form, &out) != nil {
		return nil
	}
	return out.Zones
}
