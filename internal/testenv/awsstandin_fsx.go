package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// standInFS is what the stand-in adds to moto's FSx file system: the
// lifecycle real FSx passes through (CREATING for a while, then AVAILABLE),
// the mount name, the Lustre version and throughput moto drops, and
// in-place updates moto cannot make.
type standInFS struct {
	left       int
	lifecycle  string
	mountName  string
	version    string
	throughput float64
	capacity   float64
	created    time.Time
	// actions are the administrative actions of in-place updates, oldest first.
	actions []*fsAction
	// failNext makes the next update's action end FAILED with this message.
	failNext string
	// gone are the lifecycles answered after DeleteFileSystem, one per
	// describe, from the last description, before the file system is gone:
	// it can still read AVAILABLE right after the call, then DELETING for
	// minutes (FSx user guide "Deleting a file system"; terraform-provider-aws
	// fsx waitFileSystemDeleted waits through AVAILABLE and DELETING).
	gone []string
	last map[string]any
}

// fsAction is one FILE_SYSTEM_UPDATE administrative action. UpdateFileSystem
// is one on FSx: the file system still reads AVAILABLE (the change queued)
// when the action is PENDING, then UPDATING while IN_PROGRESS, then
// AVAILABLE with the new values while storage is UPDATED_OPTIMIZING (hours
// to days on real FSx), then COMPLETED (FSx API reference
// AdministrativeAction; terraform-provider-aws fsx/lustre_file_system.go
// waits for the action to reach UPDATED_OPTIMIZING or COMPLETED and reports
// its FailureDetails on FAILED).
type fsAction struct {
	statuses   []string
	capacity   float64
	throughput float64
	requested  time.Time
	failure    string
}

// status is the action's current status.
func (a *fsAction) status() string { return a.statuses[0] }

// done reports whether the action no longer blocks another update.
func (a *fsAction) done() bool {
	return a.status() == "COMPLETED" || a.status() == "FAILED" || a.status() == "UPDATED_OPTIMIZING"
}

type standInDRA struct {
	doc  map[string]any
	left int
	// deleting: answered DELETING until left runs out, then gone.
	deleting bool
}

// FileSystemPolls makes new file systems answer CREATING to the first n
// DescribeFileSystems calls, and associations CREATING to their first n,
// so waiters are exercised and a test can see what ran meanwhile.
func (s *AWSStandIn) FileSystemPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ext().fsPolls, s.ext().draPolls = n, n
}

// FileSystemAvailableAfter holds new file systems in CREATING until the
// stand-in has seen event (see EventTime), e.g. "cluster demo ACTIVE": a
// create that waits for the file system before it makes the control plane
// then never finishes, so a test proves the two run side by side.
func (s *AWSStandIn) FileSystemAvailableAfter(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ext().fsGate = event
}

// FileSystemFails makes the file system answer FAILED (with a reason) to
// every describe from now on, as FSx reports a create it could not finish.
func (s *AWSStandIn) FileSystemFails(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fs := s.ext().fs[id]; fs != nil {
		fs.lifecycle, fs.left = "FAILED", 0
	}
}

// FailNextFileSystemUpdate makes the next UpdateFileSystem of the file
// system end with its administrative action FAILED and msg as FailureDetails.
func (s *AWSStandIn) FailNextFileSystemUpdate(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fs := s.ext().fs[id]; fs != nil {
		fs.failNext = msg
	}
}

// Associations lists the data repository associations of a file system as
// the stand-in holds them (lifecycle, paths, S3 policy).
func (s *AWSStandIn) Associations(fileSystemID string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, d := range s.ext().dras {
		if d.doc["FileSystemId"] == fileSystemID {
			out = append(out, d.doc)
		}
	}
	return out
}

// standInDigits is n random decimal digits.
func standInDigits(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = '0' + b[i]%10
	}
	return string(b)
}

// standInID is prefix and n random hex digits.
func standInID(prefix string, n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:n]
}

// patchFileSystems completes moto's FSx answers with what the stand-in holds.
func (s *AWSStandIn) patchFileSystems(req awsRequest, body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ext()
	switch req.op {
	case "CreateFileSystem":
		var fs map[string]any
		var in struct {
			FileSystemTypeVersion string
			LustreConfiguration   struct{ PerUnitStorageThroughput float64 }
		}
		if json.Unmarshal(doc["FileSystem"], &fs) != nil || json.Unmarshal(req.body, &in) != nil {
			return body
		}
		id, _ := fs["FileSystemId"].(string)
		e.fs[id] = &standInFS{left: e.fsPolls, lifecycle: "AVAILABLE", mountName: standInID("", 8), version: in.FileSystemTypeVersion,
			throughput: in.LustreConfiguration.PerUnitStorageThroughput, created: time.Now()}
		s.mark("CreateFileSystem " + id)
		s.patchFS(fs)
		return reencode(doc, "FileSystem", fs, body)
	case "DescribeFileSystems":
		var list []map[string]any
		var in struct{ FileSystemIds []string }
		if json.Unmarshal(doc["FileSystems"], &list) != nil || json.Unmarshal(req.body, &in) != nil {
			return body
		}
		for _, fs := range list {
			s.patchFS(fs)
		}
		for id, st := range e.fs {
			if st.last == nil || len(st.gone) == 0 || (len(in.FileSystemIds) > 0 && !slices.Contains(in.FileSystemIds, id)) {
				continue
			}
			fs := maps.Clone(st.last)
			fs["Lifecycle"], st.gone = st.gone[0], st.gone[1:]
			if len(in.FileSystemIds) == 0 {
				// A listing already shows it DELETING; a describe by id can
				// still read its old lifecycle first.
				fs["Lifecycle"] = "DELETING"
			}
			if len(st.gone) == 0 {
				delete(e.fs, id)
			}
			list = append(list, fs)
		}
		return reencode(doc, "FileSystems", list, body)
	case "DeleteFileSystem":
		var in struct{ FileSystemId string }
		_ = json.Unmarshal(req.body, &in)
		if st := e.fs[in.FileSystemId]; st != nil && st.last != nil {
			st.gone = []string{"AVAILABLE", "DELETING", "DELETING"}
		} else {
			delete(e.fs, in.FileSystemId)
		}
		for id, d := range e.dras {
			if d.doc["FileSystemId"] == in.FileSystemId {
				delete(e.dras, id)
			}
		}
	}
	return body
}

// patchFS adds lifecycle, mount name, version and the in-place changes to
// one description; the caller holds s.mu.
func (s *AWSStandIn) patchFS(fs map[string]any) {
	id, _ := fs["FileSystemId"].(string)
	st := s.ext().fs[id]
	if st == nil {
		return
	}
	lifecycle := st.lifecycle
	if gate := s.ext().fsGate; gate != "" && !s.seen(gate) {
		lifecycle = "CREATING"
	} else if st.left > 0 {
		st.left--
		lifecycle = "CREATING"
	} else if lifecycle == "AVAILABLE" {
		s.mark(id + " AVAILABLE")
	}
	if lifecycle == "AVAILABLE" {
		lifecycle = s.advanceActions(st, fs)
	}
	fs["Lifecycle"] = lifecycle
	if lifecycle == "FAILED" {
		fs["FailureDetails"] = map[string]any{"Message": "stand-in: the file system could not be created"}
	}
	fs["FileSystemTypeVersion"] = st.version
	fs["CreationTime"] = float64(st.created.Unix())
	if st.capacity > 0 {
		fs["StorageCapacity"] = st.capacity
	}
	lc, _ := fs["LustreConfiguration"].(map[string]any)
	if lc == nil {
		lc = map[string]any{}
	}
	lc["MountName"] = st.mountName
	if st.throughput > 0 {
		lc["PerUnitStorageThroughput"] = st.throughput
	}
	fs["LustreConfiguration"] = lc
	st.last = maps.Clone(fs)
}

// advanceActions moves the latest administrative action one step per
// describe, applies its values once IN_PROGRESS is over, lists every action
// in the description and returns the lifecycle to report; the caller holds s.mu.
func (s *AWSStandIn) advanceActions(st *standInFS, fs map[string]any) string {
	lifecycle := "AVAILABLE"
	var list []map[string]any
	for _, a := range st.actions {
		if len(a.statuses) > 1 {
			a.statuses = a.statuses[1:]
		}
		if a.status() == "IN_PROGRESS" {
			lifecycle = "UPDATING"
		}
		if a.status() == "UPDATED_OPTIMIZING" || a.status() == "COMPLETED" {
			if a.capacity > 0 {
				st.capacity = a.capacity
			}
			if a.throughput > 0 {
				st.throughput = a.throughput
			}
		}
		target := map[string]any{}
		if a.capacity > 0 {
			target["StorageCapacity"] = a.capacity
		}
		if a.throughput > 0 {
			target["LustreConfiguration"] = map[string]any{"PerUnitStorageThroughput": a.throughput}
		}
		doc := map[string]any{"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "Status": a.status(), "RequestTime": float64(a.requested.UnixMilli()) / 1000,
			"TargetFileSystemValues": target}
		if a.status() == "FAILED" {
			doc["FailureDetails"] = map[string]any{"Message": a.failure}
		}
		list = append(list, doc)
	}
	if len(list) > 0 {
		fs["AdministrativeActions"] = list
	}
	return lifecycle
}

func reencode(doc map[string]json.RawMessage, field string, v any, fallback []byte) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		return fallback
	}
	doc[field] = raw
	out, err := json.Marshal(doc)
	if err != nil {
		return fallback
	}
	return out
}

// serveFSx answers the FSx operations moto lacks: in-place updates and data
// repository associations.
func (s *AWSStandIn) serveFSx(w http.ResponseWriter, req awsRequest) {
	var in struct {
		FileSystemId, DataRepositoryPath, FileSystemPath string
		StorageCapacity                                  float64
		LustreConfiguration                              struct{ PerUnitStorageThroughput float64 }
		AssociationId                                    string
		AssociationIds                                   []string
		BatchImportMetaDataOnCreate                      bool
		S3                                               map[string]any
		Filters                                          []struct {
			Name   string
			Values []string
		}
		Tags []map[string]string
	}
	_ = json.Unmarshal(req.body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ext()
	notFound := func(what string) {
		writeAWSError(w, "fsx", http.StatusBadRequest, what+"NotFound", "stand-in: "+what+" not found")
	}
	switch req.op {
	case "UpdateFileSystem":
		fs := e.fs[in.FileSystemId]
		if fs == nil {
			notFound("FileSystem")
			return
		}
		for _, a := range fs.actions {
			if !a.done() {
				// FSx refuses a second update while one runs (UpdateFileSystem
				// API reference; the message as the FSx CSI driver's
				// pkg/cloud tests record it).
				writeAWSError(w, "fsx", http.StatusBadRequest, "BadRequest", "Unable to perform the storage capacity update. There is an update already in progress.")
				return
			}
		}
		// The first describe still reads PENDING (and the file system AVAILABLE).
		a := &fsAction{statuses: []string{"PENDING", "PENDING", "IN_PROGRESS", "UPDATED_OPTIMIZING", "COMPLETED"}, capacity: in.StorageCapacity,
			throughput: in.LustreConfiguration.PerUnitStorageThroughput, requested: time.Now()}
		if fs.failNext != "" {
			a.statuses, a.failure, fs.failNext = []string{"PENDING", "PENDING", "IN_PROGRESS", "FAILED"}, fs.failNext, ""
			a.capacity, a.throughput = 0, 0
		}
		fs.actions = append(fs.actions, a)
		writeFSxJSON(w, map[string]any{"FileSystem": map[string]any{"FileSystemId": in.FileSystemId, "Lifecycle": "AVAILABLE",
			"AdministrativeActions": []map[string]any{{"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "Status": "PENDING", "RequestTime": float64(a.requested.UnixMilli()) / 1000}}}})
	case "CreateDataRepositoryAssociation":
		if e.fs[in.FileSystemId] == nil {
			notFound("FileSystem")
			return
		}
		for _, d := range e.dras {
			if d.doc["FileSystemId"] == in.FileSystemId && d.doc["FileSystemPath"] == in.FileSystemPath {
				writeAWSError(w, "fsx", http.StatusBadRequest, "BadRequest", "stand-in: the file system path is already associated")
				return
			}
		}
		if !strings.HasPrefix(in.DataRepositoryPath, "s3://") {
			writeAWSError(w, "fsx", http.StatusBadRequest, "BadRequest", "stand-in: DataRepositoryPath must be an s3:// URI")
			return
		}
		id := standInID("dra-", 17)
		doc := map[string]any{"AssociationId": id, "FileSystemId": in.FileSystemId, "FileSystemPath": in.FileSystemPath,
			"DataRepositoryPath": in.DataRepositoryPath, "BatchImportMetaDataOnCreate": in.BatchImportMetaDataOnCreate, "S3": in.S3,
			"Lifecycle": "CREATING", "CreationTime": float64(time.Now().Unix()), "Tags": in.Tags,
			"ResourceARN": "arn:aws:fsx:" + Region + ":123456789012:association/" + in.FileSystemId + "/" + id}
		e.dras[id] = &standInDRA{doc: doc, left: e.draPolls}
		s.mark("CreateDataRepositoryAssociation " + id)
		writeFSxJSON(w, map[string]any{"Association": doc})
	case "DescribeDataRepositoryAssociations":
		list := []map[string]any{}
		for id, d := range e.dras {
			if !draMatches(d, id, in.AssociationIds, in.Filters) {
				continue
			}
			if d.left > 0 {
				d.left--
			} else if d.deleting {
				delete(e.dras, id)
				continue
			} else {
				d.doc["Lifecycle"] = "AVAILABLE"
				s.mark(id + " AVAILABLE")
			}
			list = append(list, d.doc)
		}
		if len(in.AssociationIds) > 0 && len(list) == 0 {
			notFound("DataRepositoryAssociation")
			return
		}
		writeFSxJSON(w, map[string]any{"Associations": list})
	case "DeleteDataRepositoryAssociation":
		d := e.dras[in.AssociationId]
		if d == nil {
			notFound("DataRepositoryAssociation")
			return
		}
		d.doc["Lifecycle"], d.deleting, d.left = "DELETING", true, 1
		writeFSxJSON(w, map[string]any{"AssociationId": in.AssociationId, "Lifecycle": "DELETING"})
	}
}

func draMatches(d *standInDRA, id string, ids []string, filters []struct {
	Name   string
	Values []string
}) bool {
	if len(ids) > 0 {
		found := false
		for _, want := range ids {
			found = found || want == id
		}
		if !found {
			return false
		}
	}
	for _, f := range filters {
		if f.Name != "file-system-id" {
			continue
		}
		found := false
		for _, v := range f.Values {
			found = found || d.doc["FileSystemId"] == v
		}
		if !found {
			return false
		}
	}
	return true
}

func writeFSxJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(v)
}
