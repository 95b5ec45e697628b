package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// threeManagers forms a cluster: the first inits, two join with the
// manager token and are promoted to voters.
func threeManagers(t testing.TB, opts ...func(*Config)) ([]*manager, *client.Client) {
	t.Helper()
	ms := []*manager{newManager(t, opts...)}
	admin := initCluster(t, ms[0])
	ctx := context.Background()
	tok, err := admin.Token(ctx, "manager")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m := newManager(t, opts...)
		resp, err := m.bare().JoinCluster(ctx, tok, ms[0].addr, "")
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		if resp.Role != "manager" {
			t.Fatalf("joined as %s", resp.Role)
		}
		ms = append(ms, m)
	}
	waitVoters(t, ms[0], 3)
	return ms, admin
}

func waitVoters(t testing.TB, m *manager, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d voters", n), 15*time.Second, func() bool {
		st := m.s.Store()
		if st == nil {
			return false
		}
		f := st.Raft().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		v := 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				v++
			}
		}
		return v == n
	})
}

func stopAll(ms []*manager) {
	for _, m := range ms {
		m.stop()
	}
}

func leaderOf(t testing.TB, ms []*manager) *manager {
	t.Helper()
	var l *manager
	waitFor(t, "a leader", 15*time.Second, func() bool {
		for _, m := range ms {
			if m.s != nil && m.s.Store() != nil && m.s.Store().IsLeader() {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

func TestThreeManagersSurviveLeaderLossAndRestart(t *testing.T) {
	t.Parallel()
	ms, _ := threeManagers(t)
	defer stopAll(ms)
	ctx := context.Background()
	// Any manager answers: writes through a follower are forwarded.
	var follower *manager
	lead := leaderOf(t, ms)
	for _, m := range ms {
		if m != lead {
			follower = m
			break
		}
	}
	fc := adminClient(t, follower.addr, ms[0].dir)
	// A watch on a follower follows its own replica.
	w, err := fc.Watch(ctx, legion.KindConfig, client.ListOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := fc.ApplyOne(ctx, configObj("default", "before", "1"), client.ApplyOptions{})
	if err != nil || r.Outcome != client.Created {
		t.Fatalf("apply through a follower: %+v %v", r, err)
	}
	e, err := w.Next()
	if err != nil || e.Type != client.Added || e.Version != r.Object.GetMetadata().Version {
		t.Fatalf("watch on a follower: %+v %v", e, err)
	}
	got, err := fc.Get(ctx, legion.KindConfig, "default", "before")
	if err != nil || got.GetMetadata().Version != r.Object.GetMetadata().Version {
		t.Fatalf("linearizable get through a follower: %v %v", got, err)
	}
	// A brief apply passed on by a follower is answered brief.
	if r, err = fc.ApplyOne(ctx, configObj("default", "before", "2"), client.ApplyOptions{Brief: true}); err != nil ||
		r.Outcome != client.Updated || r.Object.GetMetadata().Version <= got.GetMetadata().Version ||
		r.Object.(*legion.Config).Spec.Data != nil || r.Previous != nil {
		t.Fatalf("brief apply through a follower: %+v %v", r, err)
	}

	// Kill the leader hard: another is elected and writes continue.
	lead.kill()
	rest := []*manager{}
	for _, m := range ms {
		if m != lead {
			rest = append(rest, m)
		}
	}
	newLead := leaderOf(t, rest)
	nc := adminClient(t, newLead.addr, ms[0].dir)
	var last uint64
	for i := range 5 {
		r, err := applyAgain(t, nc, configObj("default", fmt.Sprint("after-", i), "x"))
		if err != nil {
			t.Fatalf("write after the leader died: %v", err)
		}
		if r.Object.GetMetadata().Version <= last {
			t.Fatalf("versions not increasing: %d after %d", r.Object.GetMetadata().Version, last)
		}
		last = r.Object.GetMetadata().Version
	}
	// The old leader comes back from its disk and catches up.
	lead.restart()
	waitFor(t, "the old leader to catch up", 15*time.Second, func() bool {
		return lead.s.Store().AppliedIndex() >= last
	})
	objs, _, err := lead.s.Store().List(legion.KindConfig, "default", nil)
	if err != nil || len(objs) != 6 {
		t.Fatalf("the restarted manager holds %d configs, want 6 (%v)", len(objs), err)
	}

	// Full-cluster restart: every object kept, versions still increasing.
	for _, m := range ms {
		m.stop()
	}
	for _, m := range ms {
		m.restart()
	}
	leaderOf(t, ms)
	c := adminClient(t, ms[1].addr, ms[0].dir)
	list, _, err := c.List(ctx, legion.KindConfig, client.ListOptions{})
	if err != nil || len(list) != 6 {
		t.Fatalf("after a full restart: %d configs, %v", len(list), err)
	}
	// Three managers just elected one, under the test timing's lease.
	r, err = applyAgain(t, c, configObj("default", "after-restart", "x"))
	if err != nil || r.Object.GetMetadata().Version <= last {
		t.Fatalf("write after a full restart: %+v %v (last version %d)", r, err, last)
	}

	// Without a quorum the API answers UNAVAILABLE (no leader, or a write
	// that may still apply), and a client that does not retry hears it.
	ms[0].stop()
	ms[2].stop()
	lone, err := client.New(client.Options{Server: ms[1].addr, CredentialsFile: filepath.Join(ms[0].dir, AdminFile), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	_, err = lone.ApplyOne(ctx, configObj("default", "no-quorum", "x"), client.ApplyOptions{})
	if client.Code(err) != codes.Unavailable {
		t.Fatalf("write without a quorum: %v, want UNAVAILABLE", err)
	}
	if _, err := lone.Get(ctx, legion.KindConfig, "default", "before"); client.Code(err) != codes.Unavailable {
		t.Fatalf("linearizable read without a quorum: %v, want UNAVAILABLE", err)
	}
}

func TestLaggingManagerCaughtUpBySnapshot(t *testing.T) {
	t.Parallel()
	// Few logs kept after a snapshot, so that 30 writes compact past
	// the stopped manager and it must take a snapshot to catch up; a
	// lease the leader keeps while it writes with a follower down.
	ms, admin := threeManagers(t, func(c *Config) { c.Timing = store.SteadyTiming(); c.Timing.TrailingLogs = 5 })
	defer stopAll(ms)
	ctx := context.Background()
	lead := leaderOf(t, ms)
	var lag *manager
	for _, m := range ms {
		if m != lead {
			lag = m
			break
		}
	}
	lagApplied := lag.s.Store().AppliedIndex()
	lag.stop()
	lc := adminClient(t, lead.addr, ms[0].dir)
	for i := range 30 {
		if _, err := lc.ApplyOne(ctx, configObj("default", fmt.Sprint("c", i), "x"), client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lead.s.Store().Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first := lead.s.Store().FirstIndex(); first <= lagApplied+1 {
		t.Fatalf("the leader's log starts at %d: not compacted past the stopped manager's %d", first, lagApplied)
	}
	lag.restart()
	target := lead.s.Store().AppliedIndex()
	waitFor(t, "the lagging manager to catch up", 15*time.Second, func() bool {
		return lag.s.Store().AppliedIndex() >= target
	})
	if lag.s.Store().AppliedIndex() <= lagApplied {
		t.Fatal("no progress")
	}
	objs, _, _ := lag.s.Store().List(legion.KindConfig, "default", nil)
	if len(objs) != 30 {
		t.Fatalf("lagging manager holds %d configs, want 30", len(objs))
	}
	_ = admin
}

func TestRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx := context.Background()
	applied := func() uint64 { return m.s.Store().AppliedIndex() }
	members := func() int {
		f := m.s.Store().Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		return len(f.Configuration().Servers)
	}
	before, beforeMembers := applied(), members()

	// No certificate.
	if _, _, err := m.bare().List(ctx, legion.KindConfig, client.ListOptions{}); client.Code(err) != codes.Unauthenticated {
		t.Fatalf("client without a certificate: %v", err)
	}
	// A certificate from another CA.
	other, _ := pki.NewCA(time.Now())
	key, _ := pki.NewKey()
	csr, _ := pki.CSR(key, "admin")
	cert, _ := other.Issue(csr, pki.Identity{Name: "admin", Role: pki.RoleAdmin}, nil, time.Now())
	kp, _ := pki.KeyPEM(key)
	creds, err := pki.NewCredentials(cert, kp, other.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := client.New(client.Options{Server: m.addr, Credentials: creds, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.ApplyOne(ctx, configObj("default", "x", "y"), client.ApplyOptions{}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("client with another CA's certificate: %v", err)
	}
	// The same stranger trusting our CA but presenting its own certificate.
	ours, _ := pki.LoadBundle(filepath.Join(m.dir, AdminFile))
	mixed := &pki.Credentials{Cert: creds.Cert, CA: ours.CA, Pool: ours.Pool}
	mc, _ := client.New(client.Options{Server: m.addr, Credentials: mixed, Retry: -1})
	defer mc.Close()
	if _, err := mc.ApplyOne(ctx, configObj("default", "x", "y"), client.ApplyOptions{}); err == nil {
		t.Fatal("a certificate of another CA was accepted by the server")
	}

	// Join tokens: wrong digest, wrong secret, worker token for a manager.
	// The worker token is rotated first: the old one must no longer work.
	oldTok, _ := admin.Token(ctx, "worker")
	workerTok, err := admin.RotateToken(ctx, "worker")
	if err != nil {
		t.Fatal(err)
	}
	before = applied()
	tok, _ := pki.ParseToken(workerTok)
	joiner := newManager(t)
	defer joiner.stop()
	jc := joiner.bare()
	cases := []struct {
		name, token, role, want string
	}{
		{"wrong digest", pki.Token{Digest: pki.Digest(other.Cert), Secret: tok.Secret}.String(), "", "not the cluster the token is for"},
		{"wrong secret", pki.Token{Digest: tok.Digest, Secret: pki.NewSecret()}.String(), "", "secret is not valid"},
		{"worker token for a manager", workerTok, "manager", "a worker token cannot join a manager"},
		{"garbage", "LGN-1-nope", "", "join token"},
		{"rotated token", oldTok, "", "secret is not valid"},
	}
	for _, tc := range cases {
		_, err := jc.JoinCluster(ctx, tc.token, m.addr, tc.role)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// The joiner is still fresh and the cluster unchanged.
	if st, err := jc.Status(ctx); err != nil || st.Initialized {
		t.Fatalf("joiner after refusals: %+v %v", st, err)
	}
	if applied() != before || members() != beforeMembers {
		t.Fatalf("refusals wrote: applied %d -> %d, members %d -> %d", before, applied(), beforeMembers, members())
	}
	// A wrong digest is refused before anything is sent: the joining side
	// fails the handshake itself.
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(pki.JoinConfig(pki.Digest(other.Cert), nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pb.NewClusterClient(conn).Join(ctx, &pb.JoinRequest{Token: workerTok})
	if err == nil || !strings.Contains(err.Error(), "not the cluster the token is for") {
		t.Fatalf("join over a handshake with the wrong digest: %v", err)
	}
	_ = tls.VersionTLS13
}

func TestWorkerJoinsAndServesNothing(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	admin := initCluster(t, m)
	ctx := context.Background()
	tok, _ := admin.Token(ctx, "worker")
	w := newManager(t)
	defer w.stop()
	resp, err := w.bare().JoinCluster(ctx, tok, m.addr, "")
	if err != nil || resp.Role != "worker" {
		t.Fatalf("worker join: %+v %v", resp, err)
	}
	// A client of the cluster takes only a manager's certificate as a
	// server's: the worker's is refused at the handshake, saying so.
	wc := adminClient(t, w.addr, m.dir)
	if _, _, err := wc.List(ctx, legion.KindConfig, client.ListOptions{}); err == nil ||
		!strings.Contains(err.Error(), "is worker") || !strings.Contains(err.Error(), "point --server at a manager") {
		t.Fatalf("API on a worker: %v", err)
	}
	// The worker keeps its certificate across a restart, and the manager
	// it joined through, for its agent.
	w.stop()
	w.restart()
	if st, err := w.bare().Status(ctx); err != nil || !st.Initialized || st.Role != "worker" {
		t.Fatalf("worker after restart: %+v %v", st, err)
	}
	if got := w.s.JoinedThrough(); len(got) != 1 || got[0] != m.addr {
		t.Fatalf("worker joined through %q, want [%s]", got, m.addr)
	}
	if got := m.s.JoinedThrough(); got != nil {
		t.Fatalf("the first manager joined through nothing, got %q", got)
	}
}

// A manager certificate of the cluster is not enough for Raft calls: the
// caller must be a member.
func TestRaftCallsFromNonMembersAreRefused(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	initCluster(t, m)
	files, err := pki.LoadNodeFiles(filepath.Join(m.dir, PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := files.CA()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := pki.NewKey()
	csr, _ := pki.CSR(key, "x")
	cert, err := ca.Issue(csr, pki.Identity{Name: "stranger", Role: pki.RoleManager}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := pki.KeyPEM(key)
	creds, err := pki.NewCredentials(cert, kp, files.CACert)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := []byte(`{"Term": 99}`)
	_, err = pb.NewRaftClient(conn).RequestVote(context.Background(), &pb.RaftMessage{Payload: payload})
	if err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("vote request from a non-member: %v", err)
	}
	if term := m.s.Store().Raft().CurrentTerm(); term >= 99 {
		t.Fatalf("the refused call moved the term to %d", term)
	}
}
