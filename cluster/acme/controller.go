package acme

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// Timings of one order.
const (
	// OrderTimeout bounds an order from its creation to the certificate.
	OrderTimeout = 5 * time.Minute
	// ChallengeWait is how long the leader waits for the proxies to
	// answer a challenge before asking the authority to validate anyway
	// (the leader may not reach the host's name itself).
	ChallengeWait = 30 * time.Second
	// challengePoll is how often it looks meanwhile.
	challengePoll = 250 * time.Millisecond
)

// Store is what the controller needs of the replicated store.
type Store interface {
	Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error)
	List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)
	Put(ctx context.Context, o legion.Object, opts store.WriteOptions) (obj, prev legion.Object, err error)
	WriteStatus(ctx context.Context, o legion.Object, pre store.Precondition) error
	Version() (uint64, error)
	WaitChange(ctx context.Context, from uint64, kinds ...legion.Kind) error
}

// Controller keeps the certificates of the Routes asking for ACME and
// reports in every TLS Route's status what its Secret holds. It runs on
// the leader only.
type Controller struct {
	Store Store
	// HTTPClient talks to the authorities (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Answered, when set, says whether the proxies answer a challenge
	// yet; nil asks http://<host>/.well-known/acme-challenge/<token>.
	Answered func(ctx context.Context, c legion.ACMEChallenge) bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Retry and MaxRetry are the first and longest wait after a failed
	// order (zero: RetryFirst, RetryMax).
	Retry, MaxRetry time.Duration
	Logger          *slog.Logger

	mu       sync.Mutex
	failing  map[string]*Failure     // by group key
	accounts map[string]*acme.Client // by account Secret name
	// ordering is the group whose order runs in each namespace, by
	// namespace: a namespace's orders run one at a time, and the
	// namespaces' side by side, so a route naming a slow or silent
	// directory (any route may name one) holds up its own namespace's
	// certificates only, not every other tenant's.
	ordering map[string]string
	orders   sync.WaitGroup         // the orders running
	done     chan struct{}          // an order ended: pass again (buffered, 1)
	acctMu   map[string]*sync.Mutex // by account Secret name: one registers it
}

func (c *Controller) defaults() {
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Retry == 0 {
		c.Retry = RetryFirst
	}
	if c.MaxRetry == 0 {
		c.MaxRetry = RetryMax
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Answered == nil {
		c.Answered = c.askProxy
	}
	c.mu.Lock()
	if c.done == nil {
		c.done = make(chan struct{}, 1)
	}
	c.mu.Unlock()
}

// Run passes after every change to Routes or Secrets, when an order or a
// retry is due and when an order ends, until ctx ends; then it waits for
// the orders it started, which end with ctx.
func (c *Controller) Run(ctx context.Context) error {
	c.defaults()
	defer c.Wait()
	for ctx.Err() == nil {
		at, err := c.Store.Version()
		if err != nil {
			return err
		}
		next := c.Pass(ctx)
		wctx, cancel := context.WithCancel(ctx)
		var timer *time.Timer
		if !next.IsZero() {
			timer = time.AfterFunc(max(next.Sub(c.Now()), 0), cancel)
		}
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-wctx.Done():
			}
		}()
		err = c.Store.WaitChange(wctx, at, legion.KindRoute, legion.KindSecret)
		if timer != nil {
			timer.Stop()
		}
		cancel()
		if err != nil && wctx.Err() == nil {
			return err
		}
	}
	return nil
}

// Wait waits for the orders running to end.
func (c *Controller) Wait() { c.orders.Wait() }

// Pass starts the orders that are due (each in the background, one per
// namespace at a time: see ordering), writes the status of the routes no
// order is under way for where it changed, and says when the next order
// or retry is due (zero: none, or only once an order running ends).
func (c *Controller) Pass(ctx context.Context) (next time.Time) {
	c.defaults()
	objs, _, err := c.Store.List(legion.KindRoute, "", nil)
	if err != nil {
		c.Logger.Warn("acme: listing routes", "err", err)
		return c.Now().Add(c.Retry)
	}
	routes := make([]*legion.Route, 0, len(objs))
	for _, o := range objs {
		routes = append(routes, o.(*legion.Route))
	}
	groups := Groups(routes)
	conflicts := HostConflicts(groups)
	seen := map[string]bool{}
	for _, g := range groups {
		seen[g.Key()] = true
		due := c.keep(ctx, g, conflicts)
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	c.mu.Lock()
	for k := range c.failing {
		if !seen[k] {
			delete(c.failing, k)
		}
	}
	c.mu.Unlock()
	return next
}

// keep decides for one group and writes the status, or, when an order is
// due, starts it (when its namespace has none running), which writes the
// status once it ends; it says when the group needs a look again (zero:
// not before an order ends).
func (c *Controller) keep(ctx context.Context, g *Group, conflicts map[string]string) time.Time {
	c.mu.Lock()
	running, busy := c.ordering[g.Namespace]
	c.mu.Unlock()
	if busy && running == g.Key() {
		return time.Time{} // its order writes its status, challenges first
	}
	sec, secVersion := c.secret(g)
	c.mu.Lock()
	fail := c.failing[g.Key()]
	if fail == nil {
		fail = ResumeFailure(g, c.Now())
		if fail != nil {
			c.setFailing(g.Key(), fail)
		}
	}
	c.mu.Unlock()
	d := Decide(g, ReadSecret(sec), fail, c.Now())
	if !d.Order {
		return c.settle(ctx, g, d, conflicts)
	}
	if first := c.startOrder(ctx, g, secVersion, d, conflicts); first != "" {
		d.Status.Message = fmt.Sprintf("waiting to order a certificate (%s): the order for secret %s of this namespace runs first, "+
			"as a namespace's orders run one at a time", d.Reason, strings.TrimPrefix(first, g.Namespace+"/"))
		c.settle(ctx, g, d, conflicts)
	}
	return time.Time{} // looked at again once an order ends
}

// startOrder starts the group's order in the background, with d's status
// written first, unless its namespace has one running: then it names
// that one's group and starts nothing.
func (c *Controller) startOrder(ctx context.Context, g *Group, secVersion uint64, d Decision, conflicts map[string]string) (first string) {
	c.mu.Lock()
	if running, busy := c.ordering[g.Namespace]; busy {
		c.mu.Unlock()
		return running
	}
	if c.ordering == nil {
		c.ordering = map[string]string{}
	}
	c.ordering[g.Namespace] = g.Key()
	c.orders.Add(1)
	c.mu.Unlock()
	c.Logger.Info("acme: ordering a certificate", "secret", g.Key(), "hosts", strings.Join(g.Hosts, ","), "why", d.Reason)
	// Before the order starts: it writes its challenges into the same
	// statuses.
	c.settle(ctx, g, d, conflicts)
	go func() {
		defer c.orders.Done()
		leaf, err := c.order(ctx, g, secVersion)
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			f := c.failed(g, err)
			c.Logger.Warn("acme: order failed", "secret", g.Key(), "err", err, "retry", f.Next)
			sec, _ := c.secret(g)
			d = Decide(g, ReadSecret(sec), f, c.Now())
		default:
			c.mu.Lock()
			delete(c.failing, g.Key())
			c.mu.Unlock()
			d = Decision{Status: Issued(g, leaf)}
			c.Logger.Info("acme: certificate stored", "secret", g.Key(), "expires", leaf.NotAfter)
		}
		if ctx.Err() == nil {
			c.settle(ctx, g, d, conflicts)
		}
		c.mu.Lock()
		delete(c.ordering, g.Namespace)
		c.mu.Unlock()
		select {
		case c.done <- struct{}{}:
		default: // a pass is called for already
		}
	}()
	return ""
}

// settle writes the status d gives the group's routes and says when the
// group needs a look again.
func (c *Controller) settle(ctx context.Context, g *Group, d Decision, conflicts map[string]string) time.Time {
	for _, r := range g.Routes {
		status := RouteStatus(r, d.Status, nil)
		if note := conflicts[r.Spec.Host]; note != "" {
			status.Message = withNote(status.Message, note)
		}
		if err := c.writeStatus(ctx, r, func(*legion.Route) legion.RouteStatus { return status }); err != nil {
			c.Logger.Warn("acme: route status", "err", err)
		}
	}
	if d.Status.NextOrder != nil {
		return *d.Status.NextOrder
	}
	return time.Time{}
}

func (c *Controller) setFailing(key string, f *Failure) {
	if c.failing == nil {
		c.failing = map[string]*Failure{}
	}
	c.failing[key] = f
}

// failed records a failed order and when to try again.
func (c *Controller) failed(g *Group, err error) *Failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.failing[g.Key()]
	if f == nil || f.Input != g.input() {
		f = &Failure{Input: g.input()}
	}
	f.Count++
	f.Next = c.Now().Add(RetryDelay(c.Retry, c.MaxRetry, f.Count))
	f.Err = strings.ReplaceAll(err.Error(), "\n", " ")
	c.setFailing(g.Key(), f)
	return f
}

// secret is the group's Secret and its version (nil, 0: none).
func (c *Controller) secret(g *Group) (*legion.Secret, uint64) {
	o, _, err := c.Store.Get(legion.KindSecret, g.Namespace, g.Secret)
	if err != nil {
		return nil, 0
	}
	s := o.(*legion.Secret)
	return s, s.Metadata.Version
}

// writeStatus sets a route's status to what status makes of the stored
// route, when it differs, reading the route again after a conflict. It
// compares with the route as stored, never the caller's copy: a status
// written since that copy was read (an order's challenges) would
// otherwise be left in place whenever the wanted status matches the
// copy's (a renewal that ends as the pass began).
func (c *Controller) writeStatus(ctx context.Context, r *legion.Route, status func(*legion.Route) legion.RouteStatus) error {
	ns, name := r.Metadata.Namespace, r.Metadata.Name
	for range 3 {
		o, _, err := c.Store.Get(legion.KindRoute, ns, name)
		if err != nil {
			return fmt.Errorf("route %s/%s: %w", ns, name, err)
		}
		cur := o.(*legion.Route)
		want := status(cur)
		if sameStatus(cur.Status, want) {
			return nil
		}
		next := *cur
		next.Status = want
		err = c.Store.WriteStatus(ctx, &next, store.Precondition{Version: cur.Metadata.Version})
		if !errors.Is(err, store.ErrConflict) {
			if err != nil {
				return fmt.Errorf("route %s/%s: writing its status: %w", ns, name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("route %s/%s: its status kept changing under the write", ns, name)
}

func sameStatus(a, b legion.RouteStatus) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// order gets a certificate for the group's hosts and stores it, with a
// new key, in the group's Secret (at secVersion, 0: a new Secret).
func (c *Controller) order(ctx context.Context, g *Group, secVersion uint64) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, OrderTimeout)
	defer cancel()
	cl, err := c.account(ctx, g.ACME)
	if err != nil {
		return nil, err
	}
	o, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(g.Hosts...))
	if err != nil {
		return nil, fmt.Errorf("creating the order: %w", err)
	}
	var challenges []legion.ACMEChallenge
	var pending []*acme.Challenge
	var authzs []string
	for _, u := range o.AuthzURLs {
		z, err := cl.GetAuthorization(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("reading authorization %s: %w", u, err)
		}
		if z.Status == acme.StatusValid {
			continue
		}
		var http01 *acme.Challenge
		for _, ch := range z.Challenges {
			if ch.Type == "http-01" {
				http01 = ch
			}
		}
		if http01 == nil {
			return nil, fmt.Errorf("host %s: the authority offers no http-01 challenge", z.Identifier.Value)
		}
		auth, err := cl.HTTP01ChallengeResponse(http01.Token)
		if err != nil {
			return nil, err
		}
		challenges = append(challenges, legion.ACMEChallenge{Host: z.Identifier.Value, Token: http01.Token, KeyAuthorization: auth})
		pending = append(pending, http01)
		authzs = append(authzs, u)
	}
	if len(challenges) > 0 {
		// Every proxy answers the challenges once they are in the
		// routes' status; they leave it with the order's outcome.
		msg := "validating " + strings.Join(g.Hosts, ", ") + " with " + g.ACME.Directory
		for _, r := range g.Routes {
			if err := c.writeStatus(ctx, r, func(cur *legion.Route) legion.RouteStatus {
				s := cur.Status
				s.Message = msg
				return RouteStatus(cur, s, challenges)
			}); err != nil {
				return nil, err
			}
		}
		c.waitAnswered(ctx, challenges)
		for _, ch := range pending {
			if _, err := cl.Accept(ctx, ch); err != nil {
				return nil, fmt.Errorf("accepting the challenge: %w", err)
			}
		}
		for i, u := range authzs {
			if _, err := cl.WaitAuthorization(ctx, u); err != nil {
				return nil, fmt.Errorf("validating %s: %w", challenges[i].Host, err)
			}
		}
	}
	if o, err = cl.WaitOrder(ctx, o.URI); err != nil {
		return nil, fmt.Errorf("waiting for the order: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: g.Hosts}, key)
	if err != nil {
		return nil, err
	}
	chain, _, err := cl.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalizing the order: %w", err)
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("the authority's certificate: %w", err)
	}
	if bad := Uncovered(leaf, g.Hosts); len(bad) > 0 {
		return nil, fmt.Errorf("the authority's certificate does not cover %s", strings.Join(bad, ", "))
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var data bytes.Buffer
	for _, der := range chain {
		pem.Encode(&data, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	pem.Encode(&data, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := c.guard(g); err != nil {
		return nil, err
	}
	obj, _ := legion.New(legion.KindSecret)
	s := obj.(*legion.Secret)
	s.Metadata.Namespace, s.Metadata.Name = g.Namespace, g.Secret
	if secVersion != 0 {
		cur, _ := c.secret(g)
		if cur != nil {
			s.Metadata.Labels = cur.Metadata.Labels
		}
	}
	s.Spec.Data = data.Bytes()
	pre := store.Precondition{Version: secVersion, MustNotExist: secVersion == 0}
	if _, _, err := c.Store.Put(ctx, s, store.WriteOptions{Precondition: pre}); err != nil {
		return nil, fmt.Errorf("secret %s: storing the certificate: %w", g.Key(), err)
	}
	return leaf, nil
}

// guard refuses to store a certificate when the routes calling for it
// changed during the order (a host taken meanwhile gets none).
func (c *Controller) guard(g *Group) error {
	objs, _, err := c.Store.List(legion.KindRoute, g.Namespace, nil)
	if err != nil {
		return err
	}
	routes := make([]*legion.Route, 0, len(objs))
	for _, o := range objs {
		routes = append(routes, o.(*legion.Route))
	}
	for _, now := range Groups(routes) {
		if now.Key() == g.Key() {
			if now.input() != g.input() {
				return errors.New("the routes naming the secret changed during the order")
			}
			return nil
		}
	}
	return errors.New("no route names the secret any more")
}

// waitAnswered waits, up to ChallengeWait, for the proxies to answer
// every challenge.
func (c *Controller) waitAnswered(ctx context.Context, challenges []legion.ACMEChallenge) {
	ctx, cancel := context.WithTimeout(ctx, ChallengeWait)
	defer cancel()
	tick := time.NewTicker(challengePoll)
	defer tick.Stop()
	for _, ch := range challenges {
		for !c.Answered(ctx, ch) {
			select {
			case <-ctx.Done():
				c.Logger.Info("acme: the proxies do not answer the challenge here yet; asking the authority anyway", "host", ch.Host)
				return
			case <-tick.C:
			}
		}
	}
}

// askProxy fetches the challenge from port 80 of the host's name.
func (c *Controller) askProxy(ctx context.Context, ch legion.ACMEChallenge) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ch.Host+"/.well-known/acme-challenge/"+ch.Token, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == ch.KeyAuthorization
}

// AccountSecret names the Secret of the system namespace holding the
// account key of a directory and email.
func AccountSecret(directory, email string) string {
	sum := sha256.Sum256([]byte(directory + "\n" + email))
	return "acme-account-" + hex.EncodeToString(sum[:8])
}

// accountHeader is the PEM header keeping the account's URL beside its
// key, so the account is registered once.
const accountHeader = "Account"

// account is a client of the directory with the email's account, made
// and registered on first use.
func (c *Controller) account(ctx context.Context, a *legion.RouteACME) (*acme.Client, error) {
	name := AccountSecret(a.Directory, a.Email)
	c.mu.Lock()
	cl := c.accounts[name]
	if c.acctMu == nil {
		c.acctMu = map[string]*sync.Mutex{}
	}
	lock := c.acctMu[name]
	if lock == nil {
		lock = &sync.Mutex{}
		c.acctMu[name] = lock
	}
	c.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	// Orders of two namespaces may ask for the same account at once: one
	// registers it, the other takes it then.
	lock.Lock()
	defer lock.Unlock()
	c.mu.Lock()
	cl = c.accounts[name]
	c.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	var key *ecdsa.PrivateKey
	var kid string
	var version uint64
	if o, _, err := c.Store.Get(legion.KindSecret, legion.SystemNamespace, name); err == nil {
		s := o.(*legion.Secret)
		version = s.Metadata.Version
		block, _ := pem.Decode(s.Spec.Data)
		if block == nil {
			return nil, fmt.Errorf("account secret %s/%s: no PEM key", legion.SystemNamespace, name)
		}
		if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return nil, fmt.Errorf("account secret %s/%s: %w", legion.SystemNamespace, name, err)
		}
		kid = block.Headers[accountHeader]
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if key == nil {
		// The key is kept before registering, so an account made by an
		// attempt that fails later is found again with it.
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		if version, err = c.putAccount(ctx, name, key, "", 0); err != nil {
			return nil, err
		}
	}
	cl = &acme.Client{Key: key, DirectoryURL: a.Directory, HTTPClient: c.HTTPClient, UserAgent: "legion"}
	if kid != "" {
		cl.KID = acme.KeyID(kid)
	} else {
		// Applying a route with acme accepts the authority's terms (5.8).
		acct, err := cl.Register(ctx, &acme.Account{Contact: []string{"mailto:" + a.Email}}, acme.AcceptTOS)
		if err != nil && !errors.Is(err, acme.ErrAccountAlreadyExists) {
			return nil, fmt.Errorf("registering %s with %s: %w", a.Email, a.Directory, err)
		}
		if acct != nil {
			cl.KID = acme.KeyID(acct.URI)
		}
		if _, err := c.putAccount(ctx, name, key, string(cl.KID), version); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.accounts == nil {
		c.accounts = map[string]*acme.Client{}
	}
	c.accounts[name] = cl
	return cl, nil
}

// putAccount stores an account key, with the account's URL once known,
// at version (0: a new Secret); it returns the new version.
func (c *Controller) putAccount(ctx context.Context, name string, key *ecdsa.PrivateKey, kid string, version uint64) (uint64, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return 0, err
	}
	block := &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	if kid != "" {
		block.Headers = map[string]string{accountHeader: kid}
	}
	obj, _ := legion.New(legion.KindSecret)
	s := obj.(*legion.Secret)
	s.Metadata.Namespace, s.Metadata.Name = legion.SystemNamespace, name
	s.Spec.Data = pem.EncodeToMemory(block)
	pre := store.Precondition{Version: version, MustNotExist: version == 0}
	stored, _, err := c.Store.Put(ctx, s, store.WriteOptions{Precondition: pre})
	if err != nil {
		return 0, fmt.Errorf("account secret %s/%s: %w", legion.SystemNamespace, name, err)
	}
	return stored.GetMetadata().Version, nil
}
