package scale

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/legionbsd/legion/internal/testcluster"
)

// AgentLabel is the CPU profile label (runtime/pprof) every simulated
// agent's goroutines carry, the agent's name as the value; the managers'
// carry testcluster.ProfileLabel.
const AgentLabel = "agent"

// CPUSplit is a CPU profile of the whole process over a window, split by
// who spent the time. The harness holds managers and agents in one
// process, so the process's CPU alone cannot say what the leader costs;
// the labels their goroutines inherit can.
type CPUSplit struct {
	buf bytes.Buffer
}

// StartCPUSplit starts profiling. It fails when another CPU profile runs
// (go test -cpuprofile, or one taken through LEGION_SCALE_PPROF).
func StartCPUSplit() (*CPUSplit, error) {
	s := &CPUSplit{}
	if err := pprof.StartCPUProfile(&s.buf); err != nil {
		return nil, fmt.Errorf("profiling the CPU: %w", err)
	}
	return s, nil
}

// CPUShares is CPU time by who spent it, as sampled.
type CPUShares struct {
	// Managers is each manager's, by its address.
	Managers map[string]time.Duration
	// Agents is the simulated agents' together.
	Agents time.Duration
	// Other is the rest: the collector's background workers, timers'
	// goroutines, the harness and the test.
	Other time.Duration
}

// Stop ends the profile and splits it.
func (s *CPUSplit) Stop() (CPUShares, error) {
	pprof.StopCPUProfile()
	p, err := profile.Parse(bytes.NewReader(s.buf.Bytes()))
	if err != nil {
		return CPUShares{}, fmt.Errorf("reading the CPU profile: %w", err)
	}
	col := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			col = i
		}
	}
	if col < 0 {
		return CPUShares{}, fmt.Errorf("the CPU profile has no cpu/nanoseconds samples")
	}
	out := CPUShares{Managers: map[string]time.Duration{}}
	for _, smp := range p.Sample {
		d := time.Duration(smp.Value[col])
		switch {
		case len(smp.Label[testcluster.ProfileLabel]) > 0:
			out.Managers[smp.Label[testcluster.ProfileLabel][0]] += d
		case len(smp.Label[AgentLabel]) > 0:
			out.Agents += d
		default:
			out.Other += d
		}
	}
	return out, nil
}

// Format gives the shares in cores over wall, the managers in address
// order with leader (the address that led when the window opened) marked.
func (c CPUShares) Format(leader string, wall time.Duration) string {
	cores := func(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()/wall.Seconds()) }
	addrs := slices.Sorted(maps.Keys(c.Managers))
	var b strings.Builder
	for _, a := range addrs {
		role := "manager"
		if a == leader {
			role = "leader"
		}
		fmt.Fprintf(&b, "%s %s %s, ", role, a, cores(c.Managers[a]))
	}
	fmt.Fprintf(&b, "agents %s, other %s cores", cores(c.Agents), cores(c.Other))
	return b.String()
}

// Save writes the profile taken (after Stop) to path, for go tool pprof:
// -tagfocus manager=ADDR shows one manager's part.
func (s *CPUSplit) Save(path string) error {
	return os.WriteFile(path, s.buf.Bytes(), 0o644)
}
