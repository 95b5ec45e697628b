package daemon

import (
	"path/filepath"
	"testing"
)

// A daemon asked for no resolver gets none: the defaults leave the
// resolver's address empty rather than taking a fixed port that another
// daemon or test on the host may hold. Set, it is kept.
func TestDefaultsAskForNoResolver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run")}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.DNSListen != "" {
		t.Fatalf("DNSListen defaults to %q, want none", o.DNSListen)
	}
	o.DNSListen = "127.0.0.1:0"
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.DNSListen != "127.0.0.1:0" {
		t.Fatalf("DNSListen set to 127.0.0.1:0 became %q", o.DNSListen)
	}
}
