package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Outcomes of an apply.
const (
	Created   = "created"
	Updated   = "updated"
	Unchanged = "unchanged"
)

// maxApplyRetries bounds how often an apply that lost a race is retried
// on top of the newer write.
const maxApplyRetries = 16

type applyItem struct {
	obj      legion.Object
	expected *uint64
	index    int // position in the request
	// keepsRestart: a Service applied without spec.pod.restartedAt, which
	// keeps the stored one (keepStored).
	keepsRestart bool
}

// decodeApply reads and admits a request's objects: Tasks are refused, a
// namespaced object without a namespace goes to default, the reserved
// namespace is refused, and the object model's admission runs on each.
func decodeApply(req *pb.ApplyRequest) ([]applyItem, error) {
	if len(req.Items) == 0 {
		return nil, status.Error(codes.InvalidArgument, "apply: no objects")
	}
	var items []applyItem
	var errs []string
	for i, it := range req.Items {
		// Refused by its size before its JSON is decoded; admission checks
		// the normalised object again.
		if n := proto.Size(it.Object); n > legion.MaxObjectSize {
			errs = append(errs, fmt.Sprintf("%s: %d bytes, at most %d (1 MiB) allowed", wireName(i, it.Object), n, legion.MaxObjectSize))
			continue
		}
		obj, err := pb.FromProto(it.Object)
		if err != nil {
			errs = append(errs, fmt.Sprintf("object %d: %v", i+1, err))
			continue
		}
		m := obj.GetMetadata()
		if obj.GetKind() == legion.KindTask {
			errs = append(errs, fmt.Sprintf("Task %s: tasks are made by the scheduler, not applied", m.Name))
			continue
		}
		if obj.GetKind().Namespaced() && m.Namespace == "" {
			m.Namespace = legion.DefaultNamespace
		}
		if m.Namespace == legion.SystemNamespace || (obj.GetKind() == legion.KindNamespace && m.Name == legion.SystemNamespace) {
			errs = append(errs, fmt.Sprintf("%s %s: namespace %s is reserved", obj.GetKind(), legion.DisplayName(obj), legion.SystemNamespace))
			continue
		}
		if err := legion.Admit(obj); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", obj.GetKind(), legion.DisplayName(obj), err))
			continue
		}
		svc, ok := obj.(*legion.Service)
		items = append(items, applyItem{obj: obj, expected: it.ExpectedVersion, index: i, keepsRestart: ok && svc.Spec.Pod.RestartedAt == nil})
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, strings.Join(errs, "; "))
	}
	// Namespaces first, then what workloads refer to, then the rest.
	sort.SliceStable(items, func(a, b int) bool { return applyOrder[items[a].obj.GetKind()] < applyOrder[items[b].obj.GetKind()] })
	return items, nil
}

// applyOrder is each kind's place in an apply: legion.Kinds' order.
var applyOrder = func() map[legion.Kind]int {
	order := map[legion.Kind]int{}
	for i, k := range legion.Kinds() {
		order[k] = i
	}
	return order
}()

// wireName names an object of a request before it is decoded: its kind
// and name when they are short enough to be names, else its position.
func wireName(i int, o *pb.Object) string {
	m := o.GetMetadata()
	if len(o.GetKind()) > 32 || len(m.GetName()) > legion.MaxNameLength || len(m.GetNamespace()) > legion.MaxNameLength {
		return fmt.Sprintf("object %d", i+1)
	}
	name := m.GetName()
	if m.GetNamespace() != "" {
		name = m.GetNamespace() + "/" + name
	}
	return fmt.Sprintf("object %d (%s %s)", i+1, o.GetKind(), name)
}

// applyItems admits and writes an apply on the leader. An apply the
// cluster-wide checks read for (see serialised) holds admit from its
// check to its last write, so two cannot both fit under one quota or
// take one port. One that admission finds adding objects under an
// objects quota is admitted again holding it.
func applyItems(ctx context.Context, st *store.Store, items []applyItem, mode applyMode, admit *sync.Mutex) (*pb.ApplyResponse, error) {
	dryRun := mode.dryRun
	lock := serialised(items)
	if lock {
		admit.Lock()
		defer admit.Unlock()
	}
	// Writes are guarded by preconditions the state machine checks in log
	// order, so they may start from this leader's local state; answers
	// that write nothing (a dry run, a refusal, "unchanged") are confirmed
	// with a linearizable read first.
	if dryRun {
		if err := st.Barrier(ctx); err != nil {
			return nil, toStatus(err)
		}
	}
	if err := checkReferences(st, items); err != nil {
		if berr := st.Barrier(ctx); berr != nil {
			return nil, toStatus(berr)
		}
		if err := checkReferences(st, items); err != nil {
			return nil, err
		}
	}
	agreed := func() (*admission, error) {
		adm, err := admitCluster(st, items, mode.user)
		if err != nil {
			// Refuse only on what the cluster has agreed on.
			if berr := st.Barrier(ctx); berr != nil {
				return nil, toStatus(berr)
			}
			if adm, err = admitCluster(st, items, mode.user); err != nil {
				return nil, toStatus(err)
			}
		}
		return adm, nil
	}
	adm, err := agreed()
	if err == nil && !lock && adm.serialise {
		admit.Lock()
		defer admit.Unlock()
		adm, err = agreed()
	}
	if err != nil {
		return nil, err
	}
	var results []*pb.ApplyResult
	if dryRun {
		results, err = answerDryRun(ctx, st, items, adm, mode.brief)
	} else {
		results, err = writeItems(ctx, st, items, adm, mode.brief)
	}
	if err != nil {
		return nil, err
	}
	// Answer in the request's order.
	out := make([]*pb.ApplyResult, len(items))
	for n, it := range items {
		out[it.index] = results[n]
	}
	return &pb.ApplyResponse{Results: slices.DeleteFunc(out, func(r *pb.ApplyResult) bool { return r == nil })}, nil
}

// answerDryRun answers a dry run object by object, as applyOne would
// write each.
func answerDryRun(ctx context.Context, st *store.Store, items []applyItem, adm *admission, brief bool) ([]*pb.ApplyResult, error) {
	results := make([]*pb.ApplyResult, len(items))
	for n, it := range items {
		cur, read := adm.current[legion.ObjectKey(it.obj)]
		obj, prev, outcome, err := applyOne(ctx, st, it, true, cur, read, true)
		if err != nil {
			return nil, itemError(items, n, nil, err)
		}
		if results[n], err = resultOf(obj, prev, outcome, brief); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// applyMode is how an apply is asked: a dry run writes nothing, a brief
// answer carries each object's metadata only (ApplyRequest.brief).
type applyMode struct {
	dryRun, brief bool
	// user: the caller is a user of namespaces (RoleBindings), not the
	// cluster admin or a manager; some settings are the admin's alone.
	user bool
}

// resultOf is an object's answer. A brief one leaves out the spec, the
// status and the previous object: encoding them, sending them and the
// client decoding them cost about a tenth of a small write's time (64
// clients on one manager, bench/run's store row).
func resultOf(obj, prev legion.Object, outcome string, brief bool) (*pb.ApplyResult, error) {
	r := &pb.ApplyResult{Outcome: outcome}
	if brief {
		r.Object = pb.HeaderOf(obj)
		return r, nil
	}
	var err error
	if r.Object, err = pb.ToProto(obj); err != nil {
		return nil, toStatus(err)
	}
	if prev != nil {
		if r.Previous, err = pb.ToProto(prev); err != nil {
			return nil, toStatus(err)
		}
	}
	return r, nil
}

// applyOne creates the object or replaces its labels and spec, keeping its
// status. An unchanged object is not written. A write that lost a race is
// tried again on top of the newer one (last applier wins), unless the
// caller named the version it expects, which turns the race into ABORTED.
// With read set, cur is the stored object (nil: none) as just read from
// this replica, where the first attempt starts; it.obj becomes the object
// written.
func applyOne(ctx context.Context, st *store.Store, it applyItem, dryRun bool, cur legion.Object, read, confirmed bool) (obj, prev legion.Object, outcome string, err error) {
	kind, m := it.obj.GetKind(), it.obj.GetMetadata()
	confirmed = confirmed || dryRun // a dry run already read linearizably
	for attempt := 0; ; attempt++ {
		if attempt > 0 || !read {
			if cur, err = readCurrent(st, it); err != nil {
				return nil, nil, "", err
			}
		}
		if cur == nil && kind == legion.KindNode {
			// A Node is made by its daemon joining; one applied first would
			// be a node that never reports, down for good.
			if !confirmed {
				if err := st.Barrier(ctx); err != nil {
					return nil, nil, "", err
				}
				confirmed = true
				continue
			}
			return nil, nil, "", status.Errorf(codes.NotFound, "no node %s in the cluster: a node is added by its daemon joining (legion join); apply only changes one that has (legion node ls)", m.Name)
		}
		if cur != nil && sameContent(cur, it.obj) || dryRun {
			// Nothing will be written: answer from a linearizable read.
			if !confirmed {
				if err := st.Barrier(ctx); err != nil {
					return nil, nil, "", err
				}
				confirmed = true
				continue
			}
			if err := checkExpected(it.expected, cur); err != nil {
				return nil, nil, "", err
			}
			if cur != nil && sameContent(cur, it.obj) {
				return cur, cur, Unchanged, nil
			}
			outcome = Created
			if cur != nil {
				outcome = Updated
			}
			return wouldBe(it.obj, cur), cur, outcome, nil
		}
		outcome = Created
		if cur != nil {
			outcome = Updated
		}
		// The request's object is this call's alone: once written it is
		// the object as stored, with no copy decoded from the store.
		prev, err := st.PutInPlace(ctx, it.obj, writeOptions(it, cur))
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) {
			if it.expected != nil {
				return nil, nil, "", status.Error(codes.Aborted, err.Error())
			}
			if attempt < maxApplyRetries {
				continue
			}
		}
		if err != nil {
			return nil, prev, outcome, err
		}
		outcome = Created
		if prev != nil {
			outcome = Updated
		}
		return it.obj, prev, outcome, nil
	}
}

// answersAlone reports whether an item that would be written over cur is
// answered by applyOne on its own, after a linearizable read: it writes
// nothing (unchanged), or it is a Node no daemon made, which is refused.
func answersAlone(it applyItem, cur legion.Object) bool {
	return cur == nil && it.obj.GetKind() == legion.KindNode || cur != nil && sameContent(cur, it.obj)
}

// writeOptions are those of the write of it over cur (nil: none stored):
// made only where cur is still the stored object, or where the caller's
// expected version is, checked in log order.
func writeOptions(it applyItem, cur legion.Object) store.WriteOptions {
	pre := store.Precondition{MustNotExist: cur == nil}
	if cur != nil {
		pre.Version = cur.GetMetadata().Version
	}
	if it.expected != nil {
		pre = store.Precondition{MustNotExist: *it.expected == 0, Version: *it.expected}
	}
	opts := store.WriteOptions{Precondition: pre, KeepStatus: true}
	if specBeforeUpdate(cur, it.obj, pre) {
		opts.KeepStatus = false // cur's status, changed: written at cur's version
	}
	return opts
}

// specBeforeUpdate gives next, a Service write that changes the pod of
// cur (the stored Service, the write's precondition naming its version),
// cur's status with status.spec made cur's spec, when the planner has
// seen cur's pod but not the rest of its spec (a scale written just
// before): the update the planner starts then comes from the spec as
// stored before this write, as rollback promises, not from the one it
// saw last, which would lose the scale. Only the write knows that order.
// Reports whether it did.
func specBeforeUpdate(cur, next legion.Object, pre store.Precondition) bool {
	c, ok := cur.(*legion.Service)
	n, ok2 := next.(*legion.Service)
	if !ok || !ok2 || pre.Version != c.Metadata.Version || c.Status.Spec == nil {
		return false
	}
	if reflect.DeepEqual(c.Spec.Pod, n.Spec.Pod) || !reflect.DeepEqual(c.Status.Spec.Pod, c.Spec.Pod) ||
		reflect.DeepEqual(*c.Status.Spec, c.Spec) {
		return false
	}
	spec := c.Spec
	n.Status = c.Status
	n.Status.Spec = &spec
	return true
}

func checkExpected(expected *uint64, cur legion.Object) error {
	switch {
	case expected == nil:
		return nil
	case *expected == 0 && cur != nil:
		return status.Errorf(codes.Aborted, "expected no object, found version %d", cur.GetMetadata().Version)
	case *expected != 0 && cur == nil:
		return status.Errorf(codes.Aborted, "expected version %d, found none", *expected)
	case *expected != 0 && cur.GetMetadata().Version != *expected:
		return status.Errorf(codes.Aborted, "expected version %d, found %d", *expected, cur.GetMetadata().Version)
	}
	return nil
}

// readCurrent reads what it will be applied over from this replica (nil:
// nothing stored), and keeps in it what the stored object holds that the
// apply leaves out (keepStored): every read of it goes through here.
func readCurrent(st *store.Store, it applyItem) (legion.Object, error) {
	m := it.obj.GetMetadata()
	cur, _, err := st.Get(it.obj.GetKind(), m.Namespace, m.Name)
	if errors.Is(err, store.ErrNotFound) {
		cur, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	keepStored(it, cur)
	return cur, nil
}

// keepStored puts in it, to be applied over cur (nil: nothing stored),
// what an apply that leaves it out does not change: a Service's
// spec.pod.restartedAt, which legion rollout restart sets and manifests
// do not name, so that applying one again restarts nothing (as kubectl
// apply keeps kubectl rollout restart's annotation). It is called at
// each read of cur, so a retry over a newer restart keeps that one.
func keepStored(it applyItem, cur legion.Object) {
	if !it.keepsRestart {
		return
	}
	s := it.obj.(*legion.Service)
	s.Spec.Pod.RestartedAt = nil
	if c, ok := cur.(*legion.Service); ok {
		s.Spec.Pod.RestartedAt = c.Spec.Pod.RestartedAt
	}
}

// sameContent compares what apply replaces: labels and spec.
func sameContent(a, b legion.Object) bool {
	la, lb := a.GetMetadata().Labels, b.GetMetadata().Labels
	if len(la) != len(lb) || !maps.Equal(la, lb) {
		return false
	}
	return sameSpec(a, b)
}

// sameSpec: a and b have the same spec.
func sameSpec(a, b legion.Object) bool {
	x, err1 := json.Marshal(a.SpecPtr())
	y, err2 := json.Marshal(b.SpecPtr())
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// wouldBe is the object a dry run would store.
func wouldBe(obj, cur legion.Object) legion.Object {
	out := legion.Clone(obj)
	m := out.GetMetadata()
	if cur == nil {
		m.Generation = 1
		return out
	}
	cm := cur.GetMetadata()
	m.UID, m.Version, m.Generation = cm.UID, cm.Version, cm.Generation
	if !sameSpec(out, cur) {
		m.Generation++
	}
	if out.StatusPtr() != nil {
		data, _ := json.Marshal(cur.StatusPtr())
		_ = json.Unmarshal(data, out.StatusPtr())
	}
	return out
}

// checkReferences refuses a Service, Job or CronJob naming a Secret,
// Config, Volume or pull secret that exists neither in its namespace nor
// earlier in the same apply, naming each missing one.
func checkReferences(st *store.Store, items []applyItem) error {
	batch := map[string]bool{}
	for _, it := range items {
		batch[legion.ObjectKey(it.obj)] = true
	}
	var errs []string
	for _, it := range items {
		pod := legion.PodOf(it.obj)
		if pod == nil {
			continue
		}
		ns := it.obj.GetMetadata().Namespace
		var missing []string
		seen := map[string]bool{}
		need := func(kind legion.Kind, name, what string) {
			key := legion.Key(kind, ns, name)
			if name == "" || seen[key] || batch[key] {
				return
			}
			seen[key] = true
			if _, _, err := st.Get(kind, ns, name); errors.Is(err, store.ErrNotFound) {
				missing = append(missing, what+" "+name)
			}
		}
		pod.References(need)
		if len(missing) > 0 {
			errs = append(errs, fmt.Sprintf("%s %s: refers to what does not exist in namespace %s: %s",
				it.obj.GetKind(), legion.DisplayName(it.obj), ns, strings.Join(missing, ", ")))
		}
	}
	if len(errs) > 0 {
		return status.Error(codes.FailedPrecondition, strings.Join(errs, "; "))
	}
	return nil
}

// admission is what the checks needing the cluster's state share for one
// apply: its items, those that would change what is stored (an unchanged
// object writes nothing, so it is not held to today's rules), and the
// Namespaces read so far.
type admission struct {
	items       []applyItem
	changed     []applyItem
	changedKeys map[string]bool
	namespaces  map[string]*legion.Namespace
	// current is what each item's key held when read (nil: nothing).
	current map[string]legion.Object
	// user: the caller is a user of namespaces, not the cluster admin.
	user bool
	// serialise: the apply adds objects under a namespace's objects
	// quota, so it must be admitted and written while no other is.
	serialise bool
}

func newAdmission(st *store.Store, items []applyItem) (*admission, error) {
	a := &admission{items: items, changedKeys: map[string]bool{}, namespaces: map[string]*legion.Namespace{},
		current: make(map[string]legion.Object, len(items))}
	for _, it := range items {
		cur, err := readCurrent(st, it)
		if err != nil {
			return nil, err
		}
		a.current[legion.ObjectKey(it.obj)] = cur
		if cur != nil && sameContent(cur, it.obj) {
			continue
		}
		a.changed = append(a.changed, it)
		a.changedKeys[legion.ObjectKey(it.obj)] = true
	}
	return a, nil
}

// security is namespace ns's security settings as the apply leaves
// them; a namespace without a Namespace object loosens and allows nothing.
func (a *admission) security(st *store.Store, ns string) (legion.NamespaceSecurity, error) {
	n, err := a.namespace(st, ns)
	if err != nil || n == nil {
		return legion.NamespaceSecurity{}, err
	}
	return n.Spec.Security, nil
}

// namespace is Namespace ns as the apply leaves it: its own, else the
// stored one; nil when there is none.
func (a *admission) namespace(st *store.Store, ns string) (*legion.Namespace, error) {
	if n, ok := a.namespaces[ns]; ok {
		return n, nil
	}
	var out *legion.Namespace
	for _, it := range a.items {
		if n, ok := it.obj.(*legion.Namespace); ok && n.Metadata.Name == ns {
			out = n
		}
	}
	if out == nil {
		o, _, err := st.Get(legion.KindNamespace, "", ns)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out = o.(*legion.Namespace)
		}
	}
	a.namespaces[ns] = out
	return out, nil
}

// admitCluster runs the admission only the leader can make, from the
// cluster's state (3.3.1, 9, 3.2, 5.8): namespace security allow-lists,
// route certificates, published ports, volume sources, tolerations, then
// namespace quotas. A refusal names the setting, the owner or the number,
// and nothing of the apply is written.
func admitCluster(st *store.Store, items []applyItem, user bool) (*admission, error) {
	a, err := newAdmission(st, items)
	if err != nil || len(a.changed) == 0 {
		return a, err
	}
	a.user = user
	checks := []struct {
		code  codes.Code
		check func(*store.Store, *admission) ([]string, error)
	}{
		{codes.FailedPrecondition, admitFinishedJobs},
		{codes.FailedPrecondition, admitNodeRoles},
		{codes.FailedPrecondition, admitSecurity},
		{codes.FailedPrecondition, admitRouteCertificates},
		{codes.AlreadyExists, admitRouteHosts},
		{codes.PermissionDenied, admitACMEDirectories},
		{codes.PermissionDenied, admitPublishing},
		{codes.PermissionDenied, admitVolumeSources},
		{codes.PermissionDenied, admitTolerations},
		{codes.PermissionDenied, admitVolumeNodes},
		{codes.AlreadyExists, admitSystemPorts},
		{codes.AlreadyExists, admitPorts},
		{codes.ResourceExhausted, admitQuotas},
		{codes.ResourceExhausted, admitObjectQuotas},
	}
	for _, c := range checks {
		errs, err := c.check(st, a)
		if err != nil {
			return a, err
		}
		if len(errs) > 0 {
			return a, status.Error(c.code, strings.Join(errs, "; ")+" (nothing applied)")
		}
	}
	return a, nil
}

// serialised reports whether an apply must be admitted and written while
// no other such apply is: one whose Services, Volumes, Namespaces or
// Routes the quota, published-port and route-host checks read (3.3.1).
func serialised(items []applyItem) bool {
	for _, it := range items {
		switch it.obj.GetKind() {
		case legion.KindService, legion.KindVolume, legion.KindNamespace, legion.KindRoute:
			return true
		}
	}
	return false
}

// listKind reads the objects of a kind (every namespace when ns is empty).
func listKind[T legion.Object](st *store.Store, kind legion.Kind, ns string) ([]T, error) {
	objs, _, err := st.List(kind, ns, nil)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	return out, nil
}
