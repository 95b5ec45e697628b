package lab_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/lab"
	"github.com/legionbsd/legion/internal/testpoll"
)

func TestMain(m *testing.M) {
	code := m.Run()
	lab.RemoveBuild()
	os.Exit(code)
}

// leftovers lists what a lab named name with its data under dir left:
// namespaces, links, processes and mounts.
func leftovers(name, dir string) []string {
	var out []string
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(nss), "\n") {
		if strings.HasPrefix(line, "lab-"+name+"-") {
			out = append(out, "namespace "+line)
		}
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		if strings.Contains(line, " lb"+name) {
			out = append(out, "link "+line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			out = append(out, "process "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, dir) {
			out = append(out, "mount "+line)
		}
	}
	return out
}

// A lab forms a cluster of a manager and a worker on addresses of its
// own range, a node killed and restarted rejoins it, and Close leaves
// nothing behind.
func TestLabFormsAndCleansUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "ok" + randomName()
	var l *lab.Lab
	t.Run("lab", func(t *testing.T) {
		l = lab.New(t, lab.Options{Name: name, Dir: dir, Managers: 1, Workers: 1, Images: []string{helloImage}})
		if _, st, err := l.Leader(); err != nil || len(st.Members) != 1 {
			t.Fatalf("leader: %v, members %v", err, st.Members)
		}
		// Pods, so that their namespaces (files under /run/netns, shared
		// by every namespace) must go too.
		c := l.Client(l.Node("m1"))
		apply(t, c, webService(2))
		testpoll.Until(t, "two pods running", 30*time.Second, 100*time.Millisecond, func() bool {
			ts, err := tasks(c)
			running := 0
			for _, task := range ts {
				if task.Status.State == legion.TaskRunning {
					running++
				}
			}
			return err == nil && running == 2
		})
		for _, n := range l.Nodes {
			if !l.Prefix().Contains(n.Addr) || n.ID == "" {
				t.Errorf("node %s at %s (id %q), want an id and an address in the lab's %s", n.Name, n.Addr, n.ID, l.Prefix())
			}
		}
		// A node killed and started again comes back into the cluster.
		w := l.Node("w1")
		if err := l.Kill(w); err != nil {
			t.Fatal(err)
		}
		if w.Running() {
			t.Fatal("w1 runs after Kill")
		}
		if err := l.Restart(w); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitFormed(30 * time.Second); err != nil {
			t.Fatalf("after w1's restart: %v", err)
		}
		if got := len(leftovers(name, dir)); got == 0 {
			t.Errorf("leftovers finds nothing of a running lab: it could not see a leak either")
		}
	})
	if l == nil {
		return
	}
	left := leftovers(name, dir)
	nss, _ := os.ReadDir("/run/netns")
	for _, n := range l.Nodes {
		for _, e := range nss {
			if strings.HasPrefix(e.Name(), daemon.PodNetNSPrefix(n.DataDir)) {
				left = append(left, "pod namespace "+e.Name()+" of "+n.Name)
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("the closed lab left:\n%s", strings.Join(left, "\n"))
	}
}

// A lab that fails half-way, after its daemons started, removes what it
// made before saying why.
func TestLabLeavesNothingAfterAFailedStart(t *testing.T) {
	t.Parallel()
	if err := lab.Available(); err != nil {
		t.Skipf("no lab: %v", err)
	}
	dir := t.TempDir()
	name := "bad" + randomName()
	l, err := lab.Open(lab.Options{Name: name, Dir: dir, Managers: 2, JoinVia: "m9"})
	if err == nil {
		l.Close()
		t.Fatal("a lab joining through a manager it does not have started")
	}
	if !strings.Contains(err.Error(), "m9") {
		t.Errorf("error %q does not name the missing manager", err)
	}
	if left := leftovers(name, dir); len(left) > 0 {
		t.Errorf("the failed lab left:\n%s", strings.Join(left, "\n"))
	}
}

// randomName keeps parallel runs of a test apart.
func randomName() string {
	b := make([]byte, 2)
	rand.Read(b)
	return hex.EncodeToString(b)
}
