package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
)

// killChildEnv makes the test binary a writer that a test kills: it
// opens the store in the directory the variable names and writes until
// it dies (see TestMain).
const (
	killChildEnv     = "LEGION_STORE_KILL_DIR"
	killChildFromEnv = "LEGION_STORE_KILL_FROM"
)

// killChild opens the store in dir (bootstrapping it the first time) and
// writes objects k<from>, k<from+1>, ... and the object "counter" in
// turn, printing "name version" once each write is acknowledged.
func killChild(dir string) {
	from, _ := strconv.Atoi(os.Getenv(killChildFromEnv))
	_, tr := raft.NewInmemTransport("m1")
	s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !s.HasState() {
		if err := s.Bootstrap("m1"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.IsLeader() {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no leader within 10 s")
			os.Exit(2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx := context.Background()
	for i := from; ; i++ {
		name := fmt.Sprint("k", i)
		if i%2 == 1 {
			name = "counter"
		}
		o, _, err := s.Put(ctx, config("default", name, strconv.Itoa(i)), WriteOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("%s %d %d\n", name, o.GetMetadata().Version, i)
	}
}

type ack struct {
	version uint64
	data    int
}

// runAndKill runs a writer on dir, kills it with SIGKILL once it has had
// n writes acknowledged, and returns every acknowledgement it printed.
func runAndKill(t *testing.T, dir string, from, n int) map[string]ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killChildFromEnv+"="+strconv.Itoa(from))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := map[string]ack{}
	sc := bufio.NewScanner(out)
	seen := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		d, _ := strconv.Atoi(f[2])
		acks[f[0]] = ack{v, d}
		if seen++; seen == n {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("writer ended with %v, want killed", err)
	}
	if seen < n {
		t.Fatalf("writer acknowledged %d writes before it ended, want %d", seen, n)
	}
	return acks
}

// Every acknowledged write survives kill -9 of its only manager, twice
// over: the state machine's file lags the log and is caught up from it.
func TestAcknowledgedWritesSurviveKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acks := runAndKill(t, dir, 0, 150)
	for k, a := range runAndKill(t, dir, 1000, 150) {
		acks[k] = a
	}
	n := openNode(t, "m1", dir)
	defer n.s.Close()
	waitFor(t, "leader", 10*time.Second, n.s.IsLeader)
	if err := n.s.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, a := range acks {
		o, _, err := n.s.Get(legion.KindConfig, "default", name)
		if err != nil {
			t.Fatalf("acknowledged write of %s at %d: %v", name, a.version, err)
		}
		got, _ := strconv.Atoi(string(o.(*legion.Config).Spec.Data))
		// The counter may have been written again after its last
		// acknowledgement, never lost.
		if v := o.GetMetadata().Version; v < a.version || (name != "counter" && v != a.version) || got < a.data {
			t.Fatalf("%s at version %d holding %d, acknowledged at %d holding %d", name, v, got, a.version, a.data)
		}
	}
	if len(acks) < 150 {
		t.Fatalf("%d objects acknowledged, want at least 150", len(acks))
	}
}
