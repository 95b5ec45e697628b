package compose

import (
	"fmt"
	"math"
	"strconv"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/legionbsd/legion"
)

// DockerCPUs reads a CPU count as docker service create's --limit-cpu and
// --reserve-cpu take it (0.5 is half a CPU), in Legion's millicores.
func DockerCPUs(s string) (legion.CPU, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: expected a number of CPUs such as 0.5 or 2", s)
	}
	return cpus(types.NanoCPUs(v)), nil
}

// DockerBytes reads a size as docker service create's --limit-memory and
// --reserve-memory take it: k, m and g are binary units (512m is 512Mi).
func DockerBytes(s string) (legion.Bytes, error) {
	b, err := dockerBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return legion.Bytes(b), nil
}
