package legion

import (
	"testing"
	"time"
)

func TestCPUCanonicalForm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want string
		m    int64
	}{
		{"0.5", "500m", 500}, {"500m", "500m", 500}, {"1", "1", 1000}, {"1000m", "1", 1000},
		{"2.25", "2250m", 2250}, {"0", "0", 0}, {"0.001", "1m", 1}, {"1.0", "1", 1000}, {"64", "64", 64000},
	}
	for _, c := range cases {
		got, err := ParseCPU(c.in)
		if err != nil {
			t.Errorf("ParseCPU(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want || got.Millis() != c.m {
			t.Errorf("ParseCPU(%q) = %s (%dm), want %s (%dm)", c.in, got, got.Millis(), c.want, c.m)
		}
	}
	for _, bad := range []string{"", "abc", "-1", "-500m", "0.0005", "1.5m", "1e3", "m", "1..2", "+5m", "1Gi"} {
		if v, err := ParseCPU(bad); err == nil {
			t.Errorf("ParseCPU(%q) = %s, want an error", bad, v)
		}
	}
}

func TestBytesCanonicalForm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want string
		n    int64
	}{
		{"1073741824", "1Gi", 1 << 30}, {"1Gi", "1Gi", 1 << 30}, {"1024Mi", "1Gi", 1 << 30},
		{"1.5Gi", "1536Mi", 3 << 29}, {"512Mi", "512Mi", 512 << 20}, {"1G", "1G", 1e9},
		{"1000M", "1G", 1e9}, {"1500k", "1500k", 1500000}, {"1000", "1k", 1000}, {"1023", "1023", 1023},
		{"0", "0", 0}, {"1Ki", "1Ki", 1024}, {"0.5Ki", "512", 512}, {"2048", "2Ki", 2048}, {"1Ti", "1Ti", 1 << 40},
	}
	for _, c := range cases {
		got, err := ParseBytes(c.in)
		if err != nil {
			t.Errorf("ParseBytes(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want || int64(got) != c.n {
			t.Errorf("ParseBytes(%q) = %s (%d), want %s (%d)", c.in, got, int64(got), c.want, c.n)
		}
	}
	for _, bad := range []string{"", "Gi", "1.5", "0.3Ki", "-1Gi", "1GB", "1gi", "12Xi", "1e9", "99999999999Ei"} {
		if v, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %s, want an error", bad, v)
		}
	}
}

func TestDurationCanonicalForm(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"90s", "1m30s"}, {"1m30s", "1m30s"}, {"1h0m0s", "1h"}, {"3600s", "1h"}, {"0s", "0s"},
		{"0", "0s"}, {"500ms", "500ms"}, {"1.5s", "1s500ms"}, {"1.5m", "1m30s"}, {"25h", "25h"},
	}
	for _, c := range cases {
		got, err := ParseDuration(c.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want {
			t.Errorf("ParseDuration(%q) = %s, want %s", c.in, got, c.want)
		}
		back, err := ParseDuration(got.String())
		if err != nil || back != got {
			t.Errorf("canonical %s does not read back: %v %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "5", "-5s", "1x", "1us", "1ns", "five seconds"} {
		if v, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %s, want an error", bad, v)
		}
	}
	if Duration(90*time.Second).D() != 90*time.Second {
		t.Error("D() does not give the time.Duration back")
	}
}

func TestQuantitiesJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := ResourceRequests{CPU: 1500, Memory: 3 << 29}
	data, err := MarshalJSONValue(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"cpu":"1500m","memory":"1536Mi"}` {
		t.Fatalf("got %s", data)
	}
	var back ResourceRequests
	if err := unmarshalJSONValue([]byte(`{"cpu":1.5,"memory":1610612736}`), &back); err != nil {
		t.Fatal(err)
	}
	if back != r {
		t.Fatalf("numbers read as %+v, want %+v", back, r)
	}
}

// BenchmarkDecodeTask is decoding a task as managers and agents do at
// every report and assignment: its containers' resources (four
// quantities each, written even when zero) and durations are scalars.
func BenchmarkDecodeTask(b *testing.B) {
	o, _ := New(KindTask)
	t := o.(*Task)
	t.Metadata = Metadata{Namespace: "default", Name: "web.1-abcdef", Version: 7}
	t.Spec.Pod.Containers = []Container{
		{Name: "app", Image: "example.org/web:1", Resources: Resources{Requests: ResourceRequests{CPU: 500, Memory: 256 << 20}}},
		{Name: "sidecar", Image: "example.org/proxy:1"},
	}
	t.Spec.DesiredState = TaskRunning
	data, err := MarshalJSON(t)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := FromJSON(data)
		if err != nil {
			b.Fatal(err)
		}
		if got.(*Task).Spec.Pod.Containers[0].Resources.Requests.Memory != 256<<20 {
			b.Fatal("memory request lost")
		}
	}
}
