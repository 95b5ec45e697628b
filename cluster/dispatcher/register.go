package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// SubnetsConfig is the Config of legion.SystemNamespace holding the pod
// subnet reservations: JSON of node name to subnet index (5.3). A deleted
// node's reservation stays until every subnet is reserved.
const SubnetsConfig = "node-subnets"

// Register records what the node reports of itself in its Node's status,
// keeping the operator's spec, and gives it its pod subnet once and the
// cluster's service range.
func (s *Service) Register(ctx context.Context, req *legionpb.RegisterRequest) (*legionpb.RegisterResponse, error) {
	id, leaf, err := caller(ctx, req.GetNode())
	if err != nil {
		return nil, err
	}
	var rep legion.NodeStatus
	if len(req.GetStatus()) > 0 {
		if err := jsonfast.Unmarshal(req.GetStatus(), &rep); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "status: expected the JSON of a node status: %v", err)
		}
	}
	if rep.Addr == "" {
		rep.Addr = peerHost(ctx)
	}
	if err := storageReady(id.Name, rep); err != nil {
		return nil, err
	}
	st, err := s.leaderStore()
	if err != nil {
		return nil, err
	}
	if err := s.holds(ctx, st, id, leaf, true); err != nil {
		return nil, err
	}
	n, err := ReserveSubnet(ctx, st, id.Name)
	if err != nil {
		return nil, s.statusOf(fmt.Errorf("node %s: pod subnet: %w", id.Name, err))
	}
	plan, err := netplan.Read(st)
	if err != nil {
		return nil, s.statusOf(fmt.Errorf("node %s: the cluster's ranges: %w", id.Name, err))
	}
	cidr := plan.NodeSubnet(n).String()
	node, err := writeNode(ctx, st, id, rep, cidr)
	if err != nil {
		return nil, s.statusOf(fmt.Errorf("node %s: %w", id.Name, err))
	}
	s.beat(id.Name, nil)
	data, err := legion.MarshalJSON(node)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.log.Info("node registered", "node", id.Name, "podCidr", cidr, "addr", rep.Addr)
	return &legionpb.RegisterResponse{Node: data, PodCidr: cidr, ServiceCidr: plan.Service.String()}, nil
}

// storageReady refuses a jails node that found no ZFS root for its images
// and containers: every such node needs a pool (D7). The node checks this
// itself before it registers; the managers hold to it for any node.
func storageReady(node string, rep legion.NodeStatus) error {
	if rep.Runtime != legion.NodeRuntimeJails || rep.ZFSRoot != "" {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition, "node %s: status.zfsRoot: a jails node needs a ZFS pool and its --zfs-root dataset, and this one reports none: create the pool (zpool create) or start the daemon with --zfs-root POOL/legion, then check the host with legion doctor", node)
}

func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return ""
	}
	return host
}

// ReserveSubnet returns the node's subnet index, reserving the lowest free
// one the first time (addrplan.AssignSubnet). The reservation is written
// with a version precondition, so two nodes registering at once cannot
// take the same subnet.
//
// Reservations through this manager go one at a time: they all write the
// same record, so nodes registering together (a cluster of hundreds
// coming back) would otherwise lose the version race again and again
// until one ran out of attempts and its registration failed.
func ReserveSubnet(ctx context.Context, st *store.Store, node string) (int, error) {
	subnetMu.Lock()
	defer subnetMu.Unlock()
	for attempt := 0; ; attempt++ {
		reserved := map[string]int{}
		pre := store.Precondition{MustNotExist: true}
		o, _, err := st.Get(legion.KindConfig, legion.SystemNamespace, SubnetsConfig)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return 0, err
		default:
			c := o.(*legion.Config)
			if len(c.Spec.Data) > 0 {
				if err := jsonfast.Unmarshal(c.Spec.Data, &reserved); err != nil {
					return 0, fmt.Errorf("config %s/%s: expected JSON of node name to subnet index: %w", legion.SystemNamespace, SubnetsConfig, err)
				}
			}
			pre = store.Precondition{Version: c.Metadata.Version}
		}
		if n, ok := reserved[node]; ok {
			return n, nil
		}
		nodes, _, err := st.List(legion.KindNode, "", nil)
		if err != nil {
			return 0, err
		}
		live := make(map[string]bool, len(nodes))
		for _, o := range nodes {
			live[o.GetMetadata().Name] = true
		}
		n, err := addrplan.AssignSubnet(reserved, func(name string) bool { return live[name] }, node)
		if err != nil {
			return 0, err
		}
		for other, i := range reserved {
			if i == n { // a deleted node's subnet, taken over once all are reserved
				delete(reserved, other)
			}
		}
		reserved[node] = n
		data, err := json.Marshal(reserved)
		if err != nil {
			return 0, err
		}
		c := &legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
			Metadata: legion.Metadata{Name: SubnetsConfig, Namespace: legion.SystemNamespace}}}
		c.Spec.Data = data
		_, _, err = st.Put(ctx, c, store.WriteOptions{Precondition: pre})
		if err == nil {
			return n, nil
		}
		if !retryable(err) || attempt >= maxAttempts {
			return 0, err
		}
	}
}

// subnetMu orders the reservations ReserveSubnet makes in this process.
var subnetMu sync.Mutex

func retryable(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists)
}

// writeNode creates the node's Node or replaces what the node reports in
// its status, keeping the spec and what the leader decides (state, drain,
// last heartbeat).
func writeNode(ctx context.Context, st *store.Store, id pki.Identity, rep legion.NodeStatus, cidr string) (*legion.Node, error) {
	for attempt := 0; ; attempt++ {
		o, _, err := st.Get(legion.KindNode, "", id.Name)
		var stored legion.Object
		switch {
		case errors.Is(err, store.ErrNotFound):
			n := &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode,
				Metadata: legion.Metadata{Name: id.Name}}}
			if err := legion.Admit(n); err != nil {
				return nil, err
			}
			n.Spec.Role = legion.RoleWorker
			if id.Role == pki.RoleManager {
				n.Spec.Role = legion.RoleManager
			}
			n.Status = reported(legion.NodeStatus{State: legion.NodeUnknown}, rep, cidr)
			stored, _, err = st.Put(ctx, n, store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}})
		case err != nil:
			return nil, err
		default:
			n := o.(*legion.Node)
			n.Status = reported(n.Status, rep, cidr)
			stored, err = st.PutStatus(ctx, n, store.Precondition{Version: n.Metadata.Version})
		}
		if err == nil {
			return stored.(*legion.Node), nil
		}
		if !retryable(err) || attempt >= maxAttempts {
			return nil, err
		}
	}
}

// reported is the stored status with the node's own report laid over it.
func reported(st, rep legion.NodeStatus, cidr string) legion.NodeStatus {
	st.Hostname = rep.Hostname
	st.Addr = rep.Addr
	st.Platform = rep.Platform
	st.Runtime, st.ZFSRoot = rep.Runtime, rep.ZFSRoot
	st.Ingress = rep.Ingress
	st.Resources = rep.Resources
	st.WireGuard = rep.WireGuard
	st.Protocol = rep.Protocol
	st.ImagePins = rep.ImagePins
	st.Version = rep.Version
	st.PublishErrors = rep.PublishErrors
	st.MemoryPressure = rep.MemoryPressure
	st.PodCIDR = cidr
	return st
}
