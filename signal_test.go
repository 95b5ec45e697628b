package legion

import (
	"strings"
	"testing"
)

// Admission stores a stop signal by its canonical name, however it was
// written, so two manifests that mean the same signal store the same spec.
func TestStopSignalStoredCanonical(t *testing.T) {
	t.Parallel()
	for _, written := range []string{"quit", "SIGQUIT", "Sigquit", "QUIT"} {
		o := admitOne(t, manifest("Service", "x", svcSpec("",
			"initContainers: [{name: i, image: n, stopSignal: "+written+"}], containers: [{name: a, image: n, stopSignal: "+written+"}]")))
		pod := o.(*Service).Spec.Pod
		if got := pod.Containers[0].StopSignal; got != "SIGQUIT" {
			t.Errorf("stopSignal %q stored as %q, want SIGQUIT", written, got)
		}
		if got := pod.InitContainers[0].StopSignal; got != "SIGQUIT" {
			t.Errorf("init container's stopSignal %q stored as %q, want SIGQUIT", written, got)
		}
	}
	for _, name := range StopSignals() {
		if got, ok := ParseStopSignal(strings.ToLower(strings.TrimPrefix(name, "SIG"))); !ok || got != name {
			t.Errorf("ParseStopSignal of %s in lower case without SIG: %q, %v", name, got, ok)
		}
	}
}

// A signal the agent cannot send on FreeBSD is refused, naming the field
// and what it takes: SIGPWR is Linux's alone.
func TestStopSignalUnknownRefused(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"SIGFOO", "SIGPWR", "pwr", "9"} {
		_, err := ParseManifest("t.yaml", []byte(manifest("Service", "x", svcSpec("", "containers: [{name: a, image: n, stopSignal: '"+bad+"'}]"))))
		want := `spec.pod.containers[0].stopSignal: "` + bad + `": expected one of SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH, SIGSTOP`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("stopSignal %q: %v, want an error containing %q", bad, err, want)
		}
	}
}
