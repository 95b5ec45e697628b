package sessionsclient

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// dialTimeout bounds connecting to a pod's port.
const dialTimeout = 10 * time.Second

// portForward connects to a port of a pod this node runs and relays the
// connection's bytes: the pod's as output, the caller's as they are
// relayed in, the caller's end as a half-close.
func (c *Client) portForward(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.SessionOffer, po *legionpb.PortForwardOffer, inputs <-chan *legionpb.AttachInput) error {
	if c.cfg.PodIP == nil {
		return sendError(st, status.Error(codes.Unimplemented, "this agent does not forward ports"))
	}
	// Only to a pod of this node, at the address it has here: the agent is
	// no general proxy into the node's networks.
	ip, ok := c.cfg.PodIP(o.TaskUid)
	if !ok {
		return sendError(st, status.Errorf(codes.NotFound, "task %s/%s has no pod on this node", o.Namespace, o.Task))
	}
	if ip != po.PodIp {
		return sendError(st, status.Errorf(codes.FailedPrecondition, "task %s/%s is at %s on this node, not %s", o.Namespace, o.Task, ip, po.PodIp))
	}
	if po.Port < 1 || po.Port > 65535 {
		return sendError(st, status.Errorf(codes.InvalidArgument, "port %d: expected 1 to 65535", po.Port))
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(int(po.Port)))
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return sendError(st, status.Errorf(codes.Unavailable, "task %s/%s: connecting to port %d: %v", o.Namespace, o.Task, po.Port, err))
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// The caller's bytes go in; its end half-closes.
	go func() {
		for in := range inputs {
			if len(in.Data) > 0 {
				if _, err := conn.Write(in.Data); err != nil {
					return
				}
			}
			if in.Closed {
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if serr := st.Send(&legionpb.AttachOutput{Data: append([]byte(nil), buf[:n]...)}); serr != nil {
				return serr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return sendError(st, status.Errorf(codes.Unavailable, "task %s/%s port %d: %v", o.Namespace, o.Task, po.Port, err))
		}
	}
}
