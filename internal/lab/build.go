package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// BinaryEnv names a legion binary to use instead of building one.
const BinaryEnv = "LEGION_LAB_BINARY"

// Build compiles cmd/legion once per process and returns the binary's
// path (or $LEGION_LAB_BINARY's, when set); RemoveBuild deletes what it
// built (a TestMain calls it after the tests).
func Build() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			buildErr = fmt.Errorf("lab: cannot find the module's source")
			return
		}
		src := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "legion")
		if buildDir, buildErr = os.MkdirTemp("", "legion-lab-bin-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "legion")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", buildBin, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("lab: building legion: %v\n%s", err, out)
		}
	})
	return buildBin, buildErr
}

// RemoveBuild removes what Build made.
func RemoveBuild() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
