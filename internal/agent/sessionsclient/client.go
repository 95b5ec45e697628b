package sessionsclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// ReadLog reads a container's log records; jail.Runtime.Logs is one. It
// returns an error matching jail.ErrNotFound for a container that is gone.
type ReadLog func(ctx context.Context, id string, opts jail.LogOptions) (io.ReadCloser, error)

// ExecFunc runs a command in a container and returns its exit code.
type ExecFunc func(ctx context.Context, id string, spec jail.ExecSpec) (int, error)

// Config says where the managers are and how to read logs.
type Config struct {
	// Managers lists the managers' addresses; it is read again every
	// Refresh, so the list may change (the dispatcher session's Managers).
	Managers func() []string
	TLS      *tls.Config // the node's client configuration
	// Node is the node whose sessions to take; empty means the one the
	// certificate names. Only a manager's certificate may name another
	// (the node of `legion up` is named after its host).
	Node string
	Logs ReadLog
	// Exec runs a command in a running container; jail.Runtime.Exec is
	// one. Without it exec sessions are refused.
	Exec ExecFunc
	// PodIP says the address of a pod running on this node, by its task's
	// uid: the only addresses a port-forward connects to. Without it
	// port-forwards are refused.
	PodIP func(taskUID string) (string, bool)
	// Volumes serves volume sessions (send, receive, drop); nil refuses
	// them.
	Volumes VolumeData
	// DataDir holds the saved output of finished tasks
	// (agent.SavedOutputDir).
	DataDir string
	Logger  *slog.Logger
	// Backoff is the wait before opening a broken stream again; zero
	// means a second.
	Backoff time.Duration
	// Refresh is how often the managers' list is read; zero means 5 s.
	Refresh time.Duration
	// Keepalive is how often an idle connection is checked; zero means
	// 5 minutes, the least a manager takes without complaint.
	Keepalive time.Duration
}

// Client keeps the node's Sessions streams and serves their offers.
type Client struct {
	cfg    Config
	log    *slog.Logger
	counts counts
}

// New checks cfg and makes a client; Run serves.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Managers == nil:
		return nil, errors.New("sessions: Managers: a function listing the managers is required")
	case cfg.TLS == nil:
		return nil, errors.New("sessions: TLS: the node's client configuration is required")
	case cfg.Logs == nil:
		return nil, errors.New("sessions: Logs: a function reading containers' logs is required")
	case cfg.DataDir == "":
		return nil, errors.New("sessions: DataDir: the agent's data directory is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = 5 * time.Minute
	}
	return &Client{cfg: cfg, log: cfg.Logger}, nil
}

// Run keeps a stream with every manager listed until ctx ends, then waits
// for its streams and sessions to end.
func (c *Client) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	running := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range running {
			cancel()
		}
		wg.Wait()
	}()
	tick := time.NewTicker(c.cfg.Refresh)
	defer tick.Stop()
	for {
		want := c.cfg.Managers()
		for _, addr := range want {
			if _, ok := running[addr]; ok || addr == "" {
				continue
			}
			mctx, cancel := context.WithCancel(ctx)
			running[addr] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.keep(mctx, addr)
			}()
		}
		for addr, cancel := range running {
			if !slices.Contains(want, addr) {
				cancel()
				delete(running, addr)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// keep holds the stream with one manager, opening it again after a
// break, and serves its offers.
func (c *Client) keep(ctx context.Context, addr string) {
	conn, err := grpc.NewClient(addr, append(legionpb.FixedWindows(), grpc.WithTransportCredentials(credentials.NewTLS(c.cfg.TLS)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: c.cfg.Keepalive, Timeout: 20 * time.Second}))...)
	if err != nil {
		c.log.Error("sessions: manager address", "manager", addr, "err", err)
		return
	}
	defer conn.Close()
	var sessions sync.WaitGroup
	defer sessions.Wait()
	cl := legionpb.NewSessionsClient(conn)
	for ctx.Err() == nil {
		err := c.follow(ctx, cl, addr, &sessions)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug("sessions stream broken", "manager", addr, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(c.cfg.Backoff):
		}
	}
}

// follow reads one stream's offers, serving each in its own goroutine.
func (c *Client) follow(ctx context.Context, cl legionpb.SessionsClient, addr string, sessions *sync.WaitGroup) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cl.Sessions(sctx, &legionpb.SessionsRequest{Node: c.cfg.Node})
	if err != nil {
		return err
	}
	for {
		o, err := stream.Recv()
		if err != nil {
			return err
		}
		if o.Id == "" {
			c.log.Debug("sessions stream open", "manager", addr)
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			if err := c.serve(ctx, cl, o); err != nil && ctx.Err() == nil {
				c.log.Warn("session", "manager", addr, "task", o.Namespace+"/"+o.Task, "container", o.Container, "err", err)
			}
		}()
	}
}

// serve attaches for one offer and runs the session.
func (c *Client) serve(ctx context.Context, cl legionpb.SessionsClient, o *legionpb.SessionOffer) error {
	defer c.counts.start(kindOf(o))()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := cl.Attach(actx)
	if err != nil {
		return fmt.Errorf("attaching: %w", err)
	}
	if err := st.Send(&legionpb.AttachOutput{Session: o.Id}); err != nil {
		return fmt.Errorf("attaching: %w", err)
	}
	// The manager ends Attach when the user goes away: that ends the
	// session here. What it relays from the user (an exec's input) is
	// handed on in order; closing inputs says there is no more.
	ended := make(chan struct{})
	inputs := make(chan *legionpb.AttachInput, 16)
	go func() {
		defer close(ended)
		defer cancel()
		defer close(inputs)
		for {
			in, err := st.Recv()
			if err != nil {
				return
			}
			select {
			case inputs <- in:
			case <-actx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-ended }()
	switch k := o.Kind.(type) {
	case *legionpb.SessionOffer_Logs:
		err = c.logs(actx, st, o, k.Logs)
	case *legionpb.SessionOffer_Exec:
		err = c.exec(actx, st, o, k.Exec, inputs)
	case *legionpb.SessionOffer_PortForward:
		err = c.portForward(actx, st, o, k.PortForward, inputs)
	case *legionpb.SessionOffer_VolumeSend:
		err = c.volumeSend(actx, st, k.VolumeSend)
	case *legionpb.SessionOffer_VolumeReceive:
		err = c.volumeReceive(actx, st, k.VolumeReceive, inputs)
	case *legionpb.SessionOffer_VolumeDrop:
		err = c.volumeDrop(actx, st, k.VolumeDrop)
	default:
		err = sendError(st, errUnsupported)
	}
	if err != nil {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	// The manager ends the call once it has relayed everything.
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return nil
}
