package compose

import (
	"io"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestMain silences compose-go's logrus output (the obsolete `version`
// notice); what matters of it the converter returns as warnings.
func TestMain(m *testing.M) {
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}
