package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// autolockCheck is how often a manager compares the form of its private
// keys on disk with the cluster's autolock setting.
const autolockCheck = 5 * time.Second

// WireGuardKeyFile, in PKIDir, is a manager's WireGuard private key.
const WireGuardKeyFile = "wireguard.key"

// autolockSecret is the Secret of the reserved namespace holding the
// unlock key while autolock is on.
const autolockSecret = "autolock"

const (
	roleLocked   = "locked" // started with sealed keys, waiting for Unlock
	unlockMethod = "/legion.v1.Cluster/Unlock"
	lockedMsg    = "this manager is locked: run legion unlock on its host"
)

// sealedKeys are the private keys of PKIDir a manager seals.
var sealedKeys = []string{pki.CAKeyFile, pki.NodeKeyFile, StoreKeyFile, WireGuardKeyFile}

// autolockState is what a manager holds of its sealed keys.
type autolockState struct {
	mu      sync.Mutex
	keys    map[string][]byte // the keys in the clear, once opened (nil: read them from disk)
	started sync.Once
}

func (s *Server) pkiDir() string { return filepath.Join(s.cfg.DataDir, PKIDir) }

// StartsLocked reports whether the manager of dataDir keeps its keys
// sealed, so that it starts locked, waiting for its unlock key.
func StartsLocked(dataDir string) (bool, error) {
	return pki.AnySealed(filepath.Join(dataDir, PKIDir), sealedKeys)
}

// loadNodeFiles reads the node's certificates and keys, finishing a
// reseal a crash cut short; ErrLocked when keys are sealed and not yet
// opened.
func (s *Server) loadNodeFiles() (*pki.NodeFiles, error) {
	dir := s.pkiDir()
	if err := pki.FinishReseal(dir); err != nil {
		return nil, err
	}
	s.al.mu.Lock()
	keys := s.al.keys
	s.al.mu.Unlock()
	if keys == nil {
		sealed, err := pki.AnySealed(dir, sealedKeys)
		if err != nil {
			return nil, err
		}
		if sealed {
			return nil, pki.ErrLocked
		}
	}
	return pki.LoadNodeFilesWith(dir, keys)
}

// setLocked makes the daemon serve only Unlock.
func (s *Server) setLocked() error {
	cert, err := pki.LockedCertificate(s.cfg.Now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.state = roleLocked
	// Served until unlocked: it names the lock to callers checking the
	// cluster's CA.
	s.fresh = cert
	s.mu.Unlock()
	s.log.Warn(lockedMsg, "node", s.nodeID)
	return nil
}

// storeKey is the manager's data key: from its file, or held in memory
// while the file is sealed.
func (s *Server) storeKey() ([]byte, error) {
	path := filepath.Join(s.pkiDir(), StoreKeyFile)
	s.al.mu.Lock()
	held := s.al.keys[StoreKeyFile]
	s.al.mu.Unlock()
	if _, err := os.Stat(path); err != nil && held != nil {
		return held, nil
	}
	return store.LoadKey(path)
}

// WireGuardKeyDir is the directory holding the manager's WireGuard key
// for wg(8) to read: PKIDir, or, while that key is sealed, runDir, where
// it is written from memory.
func (s *Server) WireGuardKeyDir(runDir string) (string, error) {
	dir := s.pkiDir()
	s.al.mu.Lock()
	held := s.al.keys[WireGuardKeyFile]
	s.al.mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, WireGuardKeyFile)); err == nil || held == nil {
		return dir, nil
	}
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return "", err
	}
	if err := pki.WriteFile(filepath.Join(runDir, WireGuardKeyFile), held); err != nil {
		return "", fmt.Errorf("the sealed WireGuard key: %w", err)
	}
	return runDir, nil
}

// authorizeLocked decides Unlock, and every call to a locked manager.
func (s *Server) authorizeLocked(ctx context.Context, method string, c caller, role string) (context.Context, error) {
	if method == unlockMethod {
		if !c.loopback {
			return nil, status.Error(codes.PermissionDenied, "unlock is taken only from the manager's own host (loopback)")
		}
		return ctx, nil
	}
	// Agents and other managers go on to the next manager.
	for _, p := range []string{"/legion.v1.Dispatcher/", "/legion.v1.Sessions/", "/legion.v1.Raft/"} {
		if len(method) >= len(p) && method[:len(p)] == p {
			return nil, notApplied(lockedMsg)
		}
	}
	return nil, status.Error(codes.FailedPrecondition, lockedMsg)
}

// Unlock opens a locked manager's sealed keys with the unlock key and
// starts it as usual, the keys held in memory.
func (c *clusterService) Unlock(ctx context.Context, req *pb.UnlockRequest) (*pb.UnlockResponse, error) {
	s := c.s
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	if role := s.role(); role != roleLocked {
		return nil, status.Errorf(codes.FailedPrecondition, "this daemon is not locked (it is %s): nothing to unlock", describeRole(role))
	}
	k, err := pki.ParseUnlockKey(req.Key)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := pki.FinishReseal(s.pkiDir()); err != nil {
		return nil, toStatus(err)
	}
	keys, err := pki.ReadKeys(s.pkiDir(), sealedKeys, &k)
	if errors.Is(err, pki.ErrWrongUnlockKey) {
		return nil, status.Errorf(codes.PermissionDenied, "%v: give the key this manager last sealed with (before a rotation made while it was down, the old one)", err)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	s.al.mu.Lock()
	s.al.keys = keys
	s.al.mu.Unlock()
	if err := s.load(); err != nil {
		s.al.mu.Lock()
		s.al.keys = nil
		s.al.mu.Unlock()
		return nil, toStatus(fmt.Errorf("starting after unlock: %w", err))
	}
	if s.role() == roleLocked {
		return nil, status.Error(codes.Internal, "the keys opened but the manager is still locked")
	}
	s.log.Info("unlocked", "node", s.nodeID)
	return &pb.UnlockResponse{NodeId: s.nodeID}, nil
}

func describeRole(role string) string {
	if role == "" {
		return "in no cluster"
	}
	return "a " + role
}

// Autolock turns autolock on or off, shows or rotates the unlock key. It
// runs on the leader; every manager follows within autolockCheck.
func (c *clusterService) Autolock(ctx context.Context, req *pb.AutolockRequest) (*pb.AutolockResponse, error) {
	switch req.Action {
	case "enable", "show", "rotate", "disable":
	default:
		return nil, status.Errorf(codes.InvalidArgument, "autolock action %q: expected enable, show, rotate or disable", req.Action)
	}
	st, conn, fctx, err := c.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).Autolock(fctx, req)
	}
	cur, version, err := readUnlockKey(st)
	if err != nil {
		return nil, toStatus(err)
	}
	on := cur != nil
	switch {
	case req.Action == "show" && on:
		return &pb.AutolockResponse{Enabled: true, Key: cur.String()}, nil
	case req.Action == "show", req.Action == "rotate" && !on, req.Action == "disable" && !on:
		return nil, status.Error(codes.FailedPrecondition, "autolock is off: legion autolock enable turns it on")
	case req.Action == "enable" && on:
		return nil, status.Error(codes.FailedPrecondition, "autolock is already on: legion autolock show prints its key, rotate replaces it")
	case req.Action == "disable":
		if _, err := st.Delete(ctx, legion.KindSecret, legion.SystemNamespace, autolockSecret, store.Precondition{Version: version}); err != nil {
			return nil, toStatus(err)
		}
		c.s.log.Info("autolock disabled: managers write their keys in the clear again")
		return &pb.AutolockResponse{LeaderKeysError: c.s.followAutolock()}, nil // see below
	}
	k, err := pki.NewUnlockKey()
	if err != nil {
		return nil, toStatus(err)
	}
	o, _ := legion.New(legion.KindSecret)
	sec := o.(*legion.Secret)
	sec.Metadata.Name, sec.Metadata.Namespace = autolockSecret, legion.SystemNamespace
	sec.Spec.Data = []byte(k.String())
	pre := store.Precondition{MustNotExist: !on, Version: version}
	if _, _, err := st.Put(ctx, sec, store.WriteOptions{Precondition: pre}); err != nil {
		return nil, toStatus(err)
	}
	c.s.log.Info("autolock key set: managers seal their keys under it", "action", req.Action, "key", k.Fingerprint())
	// The leader follows at once rather than at its next check, so a
	// single manager restarted right after the answer is locked, as the
	// answer leads one to expect; the others follow within autolockCheck.
	return &pb.AutolockResponse{Enabled: true, Key: k.String(), LeaderKeysError: c.s.followAutolock()}, nil
}

// followAutolock brings this manager's keys to the cluster's autolock
// setting (checkAutolock). A failure, which the next check tries again,
// is logged and said ("" when there is none).
func (s *Server) followAutolock() string {
	if err := s.checkAutolock(); err != nil {
		s.log.Error("autolock: keys not resealed (tried again)", "err", err)
		return err.Error()
	}
	return ""
}

// readUnlockKey is the cluster's unlock key from this manager's replica
// (nil while autolock is off) and the version of its Secret.
func readUnlockKey(st *store.Store) (*pki.UnlockKey, uint64, error) {
	o, _, err := st.Get(legion.KindSecret, legion.SystemNamespace, autolockSecret)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("the autolock key: %w", err)
	}
	sec, ok := o.(*legion.Secret)
	if !ok {
		return nil, 0, fmt.Errorf("secret %s/%s: not a Secret", legion.SystemNamespace, autolockSecret)
	}
	k, err := pki.ParseUnlockKey(string(sec.Spec.Data))
	if err != nil {
		return nil, 0, fmt.Errorf("secret %s/%s: %w", legion.SystemNamespace, autolockSecret, err)
	}
	return &k, sec.Metadata.Version, nil
}

// startAutolock starts the manager's recheck of its keys' form, once.
func (s *Server) startAutolock() {
	s.al.started.Do(func() {
		s.wg.Add(1)
		go s.keepSealed()
	})
}

func (s *Server) keepSealed() {
	defer s.wg.Done()
	t := time.NewTicker(autolockCheck)
	defer t.Stop()
	for {
		s.followAutolock()
		select {
		case <-s.stopping():
			return
		case <-t.C:
		}
	}
}

// checkAutolock brings the keys on disk to the form the cluster's setting
// asks: sealed under its unlock key, or in the clear.
func (s *Server) checkAutolock() error {
	st := s.store()
	if st == nil {
		return nil
	}
	want, _, err := readUnlockKey(st)
	if err != nil {
		return err
	}
	dir := s.pkiDir()
	s.al.mu.Lock()
	defer s.al.mu.Unlock()
	if err := pki.FinishReseal(dir); err != nil {
		return err
	}
	keys := map[string][]byte{}
	done := true
	for _, n := range sealedKeys {
		f, err := pki.FormOf(dir, n)
		if err != nil {
			return err
		}
		if want == nil {
			done = done && f.Sealed == ""
		} else {
			done = done && !f.Clear && (f.Sealed == "" || f.Sealed == want.Fingerprint())
		}
		// A key in the clear is the newer (a renewal wrote it).
		if data, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			keys[n] = data
		} else if held := s.al.keys[n]; held != nil {
			keys[n] = held
		} else if f.Sealed != "" {
			return fmt.Errorf("%s: sealed, and not held in memory", n)
		}
	}
	if done {
		return nil
	}
	if err := pki.Reseal(dir, keys, want); err != nil {
		return err
	}
	if want == nil {
		s.al.keys = nil
		s.log.Info("autolock off: private keys written in the clear")
		return nil
	}
	s.al.keys = keys
	s.log.Info("autolock: private keys sealed under the unlock key", "key", want.Fingerprint())
	return nil
}

// restoreStoreKey is the data key of a stopped manager for restore: its
// file, or opened with the unlock key when sealed.
func restoreStoreKey(dataDir string, unlock *pki.UnlockKey) ([]byte, error) {
	dir := filepath.Join(dataDir, PKIDir)
	if err := pki.FinishReseal(dir); err != nil {
		return nil, err
	}
	f, err := pki.FormOf(dir, StoreKeyFile)
	if err != nil {
		return nil, err
	}
	if f.Clear || f.Sealed == "" {
		return store.LoadKey(filepath.Join(dir, StoreKeyFile))
	}
	if unlock == nil {
		return nil, fmt.Errorf("%s is locked (autolock): give its unlock key (--unlock-key-file)", dataDir)
	}
	keys, err := pki.ReadKeys(dir, []string{StoreKeyFile}, unlock)
	if err != nil {
		return nil, err
	}
	return keys[StoreKeyFile], nil
}
