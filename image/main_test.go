package image

import (
	"testing"

	"go.uber.org/goleak"
)

// Tests start registries on loopback: no goroutine may outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
