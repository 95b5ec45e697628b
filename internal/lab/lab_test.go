package lab_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/lab"
)

func TestMain(m *testing.M) {
	code := m.Run()
	lab.RemoveBuild()
	os.Exit(code)
}

// A lab forms a cluster whose nodes reach each other over the lab
// network only, and Close leaves no namespace, link or bridge behind.
func TestLabFormsAndCleansUp(t *testing.T) {
	t.Parallel()
	var l *lab.Lab
	t.Run("lab", func(t *testing.T) {
		l = lab.New(t, lab.Options{Managers: 1, Workers: 1})
		if _, st, err := l.Leader(); err != nil || len(st.Members) != 1 {
			t.Fatalf("leader: %v, members %v", err, st.Members)
		}
		for _, n := range l.Nodes {
			if !l.Prefix().Contains(n.Addr) {
				t.Errorf("node %s at %s, outside the lab's %s", n.Name, n.Addr, l.Prefix())
			}
		}
	})
	if l == nil {
		return
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(links), l.Bridge) {
		t.Errorf("a link of the lab's bridge %s is left:\n%s", l.Bridge, links)
	}
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, n := range l.Nodes {
		if strings.Contains(string(nss), n.NS) {
			t.Errorf("namespace %s is left", n.NS)
		}
	}
}
