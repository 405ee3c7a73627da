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

var pythonChecks sync.Map // module list -> error (nil when importable)

// Python returns DebianPython after checking that it imports every module
// named (e.g. "msgpack", "zmq"). A missing interpreter or module skips the
// test outside CI and fails it in CI.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	key := strings.Join(modules, ",")
	v, ok := pythonChecks.Load(key)
	if !ok {
		v, _ = pythonChecks.LoadOrStore(key, checkPython(modules))
	}
	if err, _ := v.(error); err != nil {
		unavailable(t, "python3 with "+key, err,
			"apt-get install -y python3 python3-msgpack python3-zmq python3-cbor2 (Debian packages for "+DebianPython+")")
	}
	return DebianPython
}

// checkPython returns nil or an error; it is stored as an any, so a nil error
// is kept as the untyped nil of the map.
func checkPython(modules []string) any {
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
