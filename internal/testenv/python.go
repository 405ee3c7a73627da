package testenv

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// DebianPython is the interpreter whose Debian packages (python3-msgpack,
// python3-zmq, python3-cbor2) serve as references written outside Go. The
// python3 first on PATH may be another installation without them.
const DebianPython = "/usr/bin/python3"

// pythonCheck is the outcome of importing one list of modules.
type pythonCheck struct{ err error }

var pythonChecks sync.Map // module list -> pythonCheck

// Python returns DebianPython after checking that it imports every module
// named (e.g. "msgpack", "zmq"). A missing interpreter or module skips the
// test outside CI and fails it in CI.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	key := strings.Join(modules, ",")
	v, ok := pythonChecks.Load(key)
	if !ok {
		v, _ = pythonChecks.LoadOrStore(key, pythonCheck{checkPython(modules)})
	}
	if err := v.(pythonCheck).err; err != nil {
		unavailable(t, "python3 with "+key, err,
			"apt-get install -y python3 python3-msgpack python3-zmq python3-cbor2 python3-jinja2 (Debian packages for "+DebianPython+")")
	}
	return DebianPython
}

// checkPython imports modules in DebianPython.
func checkPython(modules []string) error {
	script := "import sys"
	for _, m := range modules {
		script += "; import " + m
	}
	out, err := exec.Command(DebianPython, "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -c %q: %v: %s", DebianPython, script, err, strings.TrimSpace(string(out)))
	}
	return nil
}
