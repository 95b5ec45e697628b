package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// DefaultServer is where the CLI looks for a manager.
const DefaultServer = "127.0.0.1:7470"

// DefaultRetry is how long single calls retry UNAVAILABLE.
const DefaultRetry = 30 * time.Second

// DialRetry is how long a call keeps trying when nothing answers at the
// address at all (connection refused, no route): enough for a daemon
// restarting, short enough that a wrong or down address is said at once.
const DialRetry = 2 * time.Second

const maxMessage = 64 << 20

// Options say where and as whom to connect.
type Options struct {
	Server string // host:port of any manager; default DefaultServer
	// CredentialsFile is a PEM bundle (certificate, key, CA), such as
	// admin.pem. Without it (and without Credentials) the client presents
	// no certificate and checks none: enough for init, join and status on
	// a fresh daemon of its own host, and nothing else.
	CredentialsFile string
	Credentials     *pki.Credentials
	// Retry is how long single calls retry UNAVAILABLE; zero means
	// DefaultRetry, negative means no retry. Left zero, a call to an
	// address where no daemon answers at all fails after DialRetry; set,
	// it waits as long for one (a manager restarting).
	Retry time.Duration
}

// Client talks to one manager (which forwards to the leader).
type Client struct {
	conn      *grpc.ClientConn
	objects   pb.ObjectsClient
	cluster   pb.ClusterClient
	retry     time.Duration
	dialRetry time.Duration // how long nothing answering at server is waited out
	server    string
	creds     *pki.Credentials // nil without a cluster yet
}

// New connects (lazily: the first call dials).
func New(opts Options) (*Client, error) {
	if opts.Server == "" {
		opts.Server = DefaultServer
	}
	dialRetry := opts.Retry
	if opts.Retry == 0 {
		opts.Retry, dialRetry = DefaultRetry, DialRetry
	}
	creds := opts.Credentials
	if creds == nil && opts.CredentialsFile != "" {
		var err error
		if creds, err = pki.LoadBundle(opts.CredentialsFile); err != nil {
			return nil, err
		}
	}
	var tc *tls.Config
	if creds != nil {
		tc = creds.ClientConfig()
	} else {
		// No cluster yet to check against: only a fresh daemon of this
		// host takes calls without a certificate.
		tc = &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	}
	c := &Client{retry: opts.Retry, dialRetry: dialRetry, server: opts.Server, creds: creds}
	conn, err := grpc.NewClient(opts.Server,
		append(pb.FixedWindows(),
			grpc.WithTransportCredentials(credentials.NewTLS(tc)),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
			grpc.WithChainUnaryInterceptor(c.retryUnavailable),
			grpc.WithChainStreamInterceptor(c.retryOpen))...)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", opts.Server, err)
	}
	c.conn = conn
	c.objects = pb.NewObjectsClient(conn)
	c.cluster = pb.NewClusterClient(conn)
	return c, nil
}

// User is the user the client's credentials name, or "" when they are
// not a user's (an admin's, a node's, or none). A manager lists a user's
// every namespace, and Namespaces, as only those where it has a role.
func (c *Client) User() string {
	if c.creds == nil || c.creds.ID.Role != pki.RoleUser {
		return ""
	}
	return c.creds.ID.Name
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// retryUnavailable asks again while the cluster answers UNAVAILABLE, for
// up to the retry period: a read whatever the cause, a write only when
// it cannot have applied (see sendAgain).
func (c *Client) retryUnavailable(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	deadline := start.Add(c.retry)
	wait := 50 * time.Millisecond
	for {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err := c.unreachable(err, start); err != nil {
			return err
		}
		if !retryable(err) {
			return err
		}
		if !readOnly(method, req) && !sendAgain(err) {
			return outcomeUnknown(err)
		}
		if c.retry < 0 || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// retryOpen asks again while a stream cannot be opened (no manager
// answering); a stream that broke once open is not resumed here. A list
// is asked again whole, opening included, by List: asked here as well,
// each of its tries would wait out the dial retry.
func (c *Client) retryOpen(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == pb.Objects_ListStream_FullMethodName {
		return streamer(ctx, desc, cc, method, opts...)
	}
	start := time.Now()
	deadline := start.Add(c.retry)
	wait := 50 * time.Millisecond
	for {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err := c.unreachable(err, start); err != nil {
			return s, err
		}
		if !retryable(err) || c.retry < 0 || time.Now().Add(wait).After(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, err
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// unreachable turns a failure to reach any daemon at the address, once
// the client's dial retry has passed since start, into an error
// that says where it tried and what to do; nil otherwise.
func (c *Client) unreachable(err error, start time.Time) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || !dialFailed(st) {
		return nil
	}
	if c.retry >= 0 && time.Since(start) < c.dialRetry {
		return nil
	}
	cause := st.Message()
	if _, after, ok := strings.Cut(cause, "Error while dialing: "); ok {
		cause = strings.TrimSuffix(after, `"`)
	}
	return &noManager{status.Newf(codes.Unavailable, "no manager answers at %s (%s): is a legion daemon running there? Point --server (or LEGION_SERVER) at a running manager", c.server, cause)}
}

// noManager is unreachable's error: a gRPC status that wrap marks so
// that errors.Is matches ErrUnreachable.
type noManager struct{ st *status.Status }

func (n *noManager) Error() string              { return n.st.Err().Error() }
func (n *noManager) GRPCStatus() *status.Status { return n.st }
func (n *noManager) Is(target error) bool       { return target == ErrUnreachable }

// retryable: the cluster may answer soon (an election, a manager
// restarting). A failed TLS handshake with the manager will not get
// better; one the manager met forwarding the call (it says to ask again)
// may, once it knows the next leader.
func retryable(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	if askAgain(st) {
		return true
	}
	m := st.Message()
	return !strings.Contains(m, "handshake") && !strings.Contains(m, "certificate")
}

// readOnlyMethods change nothing: asking again is always safe.
var readOnlyMethods = map[string]bool{
	pb.Objects_Get_FullMethodName: true, pb.Objects_List_FullMethodName: true,
	pb.Objects_ListStream_FullMethodName: true, pb.Cluster_Status_FullMethodName: true,
	pb.Cluster_TokenShow_FullMethodName: true, pb.Cluster_Usage_FullMethodName: true,
}

// readOnly: the call changes nothing (a read, or an apply's dry run).
func readOnly(method string, req any) bool {
	if r, ok := req.(*pb.ApplyRequest); ok && r.GetDryRun() {
		return true
	}
	return readOnlyMethods[method]
}

// sendAgain reports whether a call that failed with UNAVAILABLE cannot
// have changed anything, so sending it again applies it at most once: no
// connection was made, or the server refused it before it could apply
// (its RetryInfo says so). Otherwise a write may have applied (the
// manager went away after committing it, leadership changed while it
// committed): sent again, it could apply twice, the second time after
// other clients' writes, undoing them.
func sendAgain(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	return dialFailed(st) || askAgain(st)
}

// askAgain: the manager refused the call before it could change anything
// and says so with a RetryInfo.
func askAgain(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// dialFailed: the call failed because no connection could be made, so
// nothing was sent.
func dialFailed(st *status.Status) bool { return strings.Contains(st.Message(), "Error while dialing") }

// outcomeUnknown says of a write's failure that it may have applied.
func outcomeUnknown(err error) error {
	st, _ := status.FromError(err)
	return &unknownOutcome{status.Newf(st.Code(), "%s: the change may or may not have been made (a manager failed while it was under way); look before making it again", st.Message())}
}

// unknownOutcome is outcomeUnknown's error: a gRPC status that wrap
// marks so that errors.Is matches ErrOutcomeUnknown.
type unknownOutcome struct{ st *status.Status }

func (u *unknownOutcome) Error() string              { return u.st.Err().Error() }
func (u *unknownOutcome) GRPCStatus() *status.Status { return u.st }

// Errors callers branch on (match with errors.Is).
var (
	ErrNotFound  = errors.New("not found")
	ErrExists    = errors.New("already exists")
	ErrAborted   = errors.New("aborted: the object changed")
	ErrCompacted = errors.New("watch compacted: list again")
	ErrReset     = errors.New("watch reset: list again")
	// ErrOutcomeUnknown is a write that failed when a manager failed
	// while it was under way: it may have applied or not. Read what it
	// was to change before writing it again (sent again blindly, it
	// could apply twice, the second time after other clients' writes).
	ErrOutcomeUnknown = errors.New("the change may or may not have been made")
	// ErrUnreachable: no daemon answered at the client's address for the
	// dial retry (DialRetry), so the call was not made.
	ErrUnreachable = errors.New("no manager answers")
)

// Error is a failed call: the server's message, with its gRPC code.
type Error struct {
	Code        codes.Code
	Msg         string
	unknown     bool // a write whose outcome is unknown (ErrOutcomeUnknown)
	unreachable bool // no manager answered at the address (ErrUnreachable)
}

func (e *Error) Error() string { return e.Msg }

// Is lets errors.Is match the sentinels by code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrExists:
		return e.Code == codes.AlreadyExists
	case ErrAborted:
		return e.Code == codes.Aborted
	case ErrOutcomeUnknown:
		return e.unknown
	case ErrUnreachable:
		return e.unreachable
	}
	return false
}

// wrap turns a gRPC error into an Error with the server's message alone.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	if st.Code() == codes.Unavailable && msg == "" {
		msg = "no manager answered"
	}
	var u *unknownOutcome
	var n *noManager
	return &Error{Code: st.Code(), Msg: msg, unknown: errors.As(err, &u), unreachable: errors.As(err, &n)}
}

// Code is the gRPC code of an error from this package (OK for nil,
// Unknown for others).
func Code(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return codes.OK
	}
	return status.Code(err)
}
