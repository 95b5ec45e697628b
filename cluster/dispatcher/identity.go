package dispatcher

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrIssued means a node already has a certificate record: its name is
// taken.
var ErrIssued = errors.New("a certificate was already issued for this node name")

// Getter reads one object of a replica; *store.Store is one.
type Getter interface {
	Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error)
}

// ReadCerts reads node's certificate record from a replica, with its
// version; nil (and 0) when the node has none.
func ReadCerts(g Getter, node string) (*pki.NodeCerts, uint64, error) {
	o, _, err := g.Get(legion.KindConfig, legion.SystemNamespace, pki.NodeCertsConfig(node))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	c, ok := o.(*legion.Config)
	if !ok {
		return nil, 0, fmt.Errorf("config %s/%s: not a Config", legion.SystemNamespace, pki.NodeCertsConfig(node))
	}
	r, err := pki.ParseNodeCerts(c.Spec.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("config %s/%s: %w", legion.SystemNamespace, c.Metadata.Name, err)
	}
	return r, c.Metadata.Version, nil
}

// RecordCert adds a certificate to the record of the node it names,
// through the leader's store, before the certificate is handed out. With
// first, the node must have no record yet (a join): ErrIssued otherwise,
// also when another join of the same name wins the race.
func RecordCert(ctx context.Context, st *store.Store, cert *x509.Certificate, first bool) error {
	node := pki.IdentityOf(cert).Name
	for attempt := 0; ; attempt++ {
		r, version, err := ReadCerts(st, node)
		if err != nil {
			return err
		}
		pre := store.Precondition{MustNotExist: true}
		if r == nil && !first {
			// A renewal finding no record: the node was removed meanwhile.
			if err := refuseRemoved(st, cert, nil); err != nil {
				return err
			}
		}
		switch {
		case r != nil && first:
			return fmt.Errorf("node %s: %w", node, ErrIssued)
		case r != nil:
			r.Add(cert)
			pre = store.Precondition{Version: version}
		default:
			r = pki.NewNodeCerts(cert)
		}
		data, err := r.Marshal()
		if err != nil {
			return err
		}
		c := &legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
			Metadata: legion.Metadata{Name: pki.NodeCertsConfig(node), Namespace: legion.SystemNamespace}}}
		c.Spec.Data = data
		_, _, err = st.Put(ctx, c, store.WriteOptions{Precondition: pre})
		if err == nil {
			return nil
		}
		if first && errors.Is(err, store.ErrExists) {
			return fmt.Errorf("node %s: %w", node, ErrIssued)
		}
		if !retryable(err) || attempt >= maxAttempts {
			return err
		}
	}
}

// ForgetCerts drops node's record, for a join that failed after recording
// its certificate, which was never handed out.
func ForgetCerts(ctx context.Context, st *store.Store, node string) error {
	_, err := st.Delete(ctx, legion.KindConfig, legion.SystemNamespace, pki.NodeCertsConfig(node), store.Precondition{})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// certRefused is the refusal of a certificate naming a node that is not
// one the cluster issued it.
func certRefused(id pki.Identity, leaf *x509.Certificate) error {
	return status.Errorf(codes.PermissionDenied, "node %s: the certificate presented (serial %s) is not one this cluster issued to node %s",
		id.Name, leaf.SerialNumber.Text(16), id.Name)
}

// holds checks that the caller's certificate is one recorded for the node
// it names. A node with no record joined before records were kept (or was
// certified outside a join): on the leader (adopt) its certificate is
// recorded now, so from then on no other certificate passes as it; a
// follower lets it through, as before.
func (s *Service) holds(ctx context.Context, st *store.Store, id pki.Identity, leaf *x509.Certificate, adopt bool) error {
	r, _, err := ReadCerts(st, id.Name)
	if err != nil {
		return s.statusOf(fmt.Errorf("node %s: certificate record: %w", id.Name, err))
	}
	if err := refuseRemoved(st, leaf, r); err != nil {
		return s.statusOf(err)
	}
	switch {
	case r != nil && r.Holds(leaf):
		return nil
	case r != nil:
		return certRefused(id, leaf)
	case !adopt:
		return nil
	}
	if err := RecordCert(ctx, st, leaf, true); errors.Is(err, ErrIssued) {
		// Another call of the node's recorded first: check against it.
		return s.holds(ctx, st, id, leaf, false)
	} else if err != nil {
		return s.statusOf(fmt.Errorf("node %s: recording its certificate: %w", id.Name, err))
	}
	s.log.Info("node certificate recorded on first use: the node had none on record", "node", id.Name,
		"serial", leaf.SerialNumber.Text(16))
	return nil
}

// ReadRemoved reads the record of removed nodes from a replica, with its
// version; an empty record (and 0) when none was written.
func ReadRemoved(g Getter) (*pki.RemovedNodes, uint64, error) {
	o, _, err := g.Get(legion.KindConfig, legion.SystemNamespace, pki.RemovedNodesConfig)
	if errors.Is(err, store.ErrNotFound) {
		r, _ := pki.ParseRemovedNodes(nil)
		return r, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	c, ok := o.(*legion.Config)
	if !ok {
		return nil, 0, fmt.Errorf("config %s/%s: not a Config", legion.SystemNamespace, pki.RemovedNodesConfig)
	}
	r, err := pki.ParseRemovedNodes(c.Spec.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("config %s/%s: %w", legion.SystemNamespace, pki.RemovedNodesConfig, err)
	}
	return r, c.Metadata.Version, nil
}

// Revoked refuses (PERMISSION_DENIED) a node certificate issued before its
// node was removed, reading the replica g; nil for any other certificate.
// The API, the dispatcher, the sessions service and the Raft transport
// all ask it, managers' certificates included.
func Revoked(g Getter, leaf *x509.Certificate) error {
	id := pki.IdentityOf(leaf)
	if id.Role != pki.RoleWorker && id.Role != pki.RoleManager {
		return nil
	}
	r, _, err := ReadCerts(g, id.Name)
	if err != nil {
		return status.Errorf(codes.Unavailable, "node %s: certificate record: %v", id.Name, err)
	}
	return refuseRemoved(g, leaf, r)
}

// refuseRemoved refuses leaf if its node was removed after issuing it;
// record is the node's current certificate record (nil if none).
func refuseRemoved(g Getter, leaf *x509.Certificate, record *pki.NodeCerts) error {
	removed, _, err := ReadRemoved(g)
	if err != nil {
		return status.Errorf(codes.Unavailable, "reading the removed nodes: %v", err)
	}
	if e, refused := removed.Refuses(leaf, record); refused {
		return legionpb.NodeRemoved(pki.RemovedMessage(leaf, e))
	}
	return nil
}

// RecordRemoval records through the leader's store that node was removed
// at now, and drops its certificate record, so every certificate issued to
// it so far is refused and a join under its name may start a new record.
// The entry is kept until the last of those certificates expires; for a
// node with no record, until now plus lifetime, the longest any could
// have been issued for. Entries past their time are dropped here.
func RecordRemoval(ctx context.Context, st *store.Store, node string, now time.Time, lifetime time.Duration) error {
	certs, _, err := ReadCerts(st, node)
	if err != nil {
		return err
	}
	until := now.Add(lifetime)
	if certs != nil {
		until = now
		for _, c := range certs.Certs {
			if c.NotAfter.After(until) {
				until = c.NotAfter
			}
		}
	}
	for attempt := 0; ; attempt++ {
		r, version, err := ReadRemoved(st)
		if err != nil {
			return err
		}
		r.Prune(now)
		r.Add(node, now, until)
		data, err := r.Marshal()
		if err != nil {
			return err
		}
		c := &legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
			Metadata: legion.Metadata{Name: pki.RemovedNodesConfig, Namespace: legion.SystemNamespace}}}
		c.Spec.Data = data
		pre := store.Precondition{Version: version}
		if version == 0 {
			pre = store.Precondition{MustNotExist: true}
		}
		_, _, err = st.Put(ctx, c, store.WriteOptions{Precondition: pre})
		if err == nil {
			break
		}
		if !retryable(err) || attempt >= maxAttempts {
			return fmt.Errorf("recording the removal of node %s: %w", node, err)
		}
	}
	return ForgetCerts(ctx, st, node)
}
