package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/netbsd/resolver"
	"github.com/miekg/dns"
)

var webService = testPod("Service", "web", "web", listen8080, "replicas: 3") +
	`        env: [{name: NAME, value: "$(HOSTNAME)"}]
` + servesHTTP("200ms") + endpointHTTP

func (n *node) service(t *testing.T, name string) *legion.Service {
	t.Helper()
	o, _, err := n.st.Get(legion.KindService, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Service)
}

func readyTasks(ts []*legion.Task) int {
	n := 0
	for _, t := range ts {
		if t.Status.State == legion.TaskRunning && t.Status.Ready && t.Spec.DesiredState == legion.TaskRunning {
			n++
		}
	}
	return n
}

// A three-replica service becomes ready; DNS answers its VIP and its
// tasks' addresses; requests through the VIP reach all three replicas.
func TestServiceBecomesReadyBehindItsVIPAndDNS(t *testing.T) {
	n := startNode(t)
	n.apply(t, webService)
	poll(t, "three ready tasks", 60*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "web")) == 3 })
	poll(t, "a VIP", 10*time.Second, func() bool { return n.service(t, "web").Status.VIP != "" })
	vip := n.service(t, "web").Status.VIP
	loopVIP := LocalAddr(netip.MustParseAddr(vip), n.vipOctet).String()

	// DNS from the zone the endpoints wrote.
	pc, l, err := resolver.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &resolver.Server{ZoneFile: n.zone, PollInterval: 20 * time.Millisecond}
	go func() { done <- srv.Serve(ctx, pc, l) }()
	defer func() { cancel(); <-done }()
	ask := func(name string) []string {
		c := &dns.Client{Timeout: time.Second}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.Exchange(m, pc.LocalAddr().String())
		if err != nil {
			return nil
		}
		var out []string
		for _, rr := range r.Answer {
			out = append(out, rr.(*dns.A).A.String())
		}
		sort.Strings(out)
		return out
	}
	poll(t, "DNS answering the VIP and three tasks", 10*time.Second, func() bool {
		return len(ask("web.default.legion.")) == 1 && len(ask("tasks.web.default.legion.")) == 3
	})
	if got := ask("web.default.legion."); got[0] != loopVIP {
		t.Fatalf("web.default.legion. = %v, want the VIP %s", got, loopVIP)
	}
	var ips []string
	for _, task := range n.tasksOf(t, "legion.service", "web") {
		ips = append(ips, task.Status.IP)
	}
	sort.Strings(ips)
	if got := ask("tasks.web.default.legion."); strings.Join(got, ",") != strings.Join(ips, ",") {
		t.Fatalf("tasks.web = %v, want %v", got, ips)
	}

	// Through the VIP: every replica answers in turn.
	seen := map[string]int{}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	poll(t, "all three replicas through the VIP", 30*time.Second, func() bool {
		resp, err := client.Get("http://" + net.JoinHostPort(loopVIP, "80") + "/")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[strings.TrimSpace(string(body))]++
		return len(seen) == 3
	})
	for name := range seen {
		if !strings.HasPrefix(name, "web-") {
			t.Errorf("a reply named %q, want a task name", name)
		}
	}
}
