package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/legionbsd/legion/image"
)

// The listings of commands that show more than objects: what -o json
// prints of them has field names of its own, in the objects' style.

// statusView is legion status as -o json prints it.
type statusView struct {
	Node          string        `json:"node"`
	Role          string        `json:"role,omitempty"`
	Initialized   bool          `json:"initialized"`
	State         string        `json:"state,omitempty"`
	Term          uint64        `json:"term,omitempty"`
	Leader        string        `json:"leader,omitempty"`
	LeaderAddress string        `json:"leaderAddress,omitempty"`
	AppliedIndex  uint64        `json:"appliedIndex,omitempty"`
	CommitIndex   uint64        `json:"commitIndex,omitempty"`
	Managers      []managerView `json:"managers,omitempty"`
	Removed       bool          `json:"removed,omitempty"`
}

type managerView struct {
	ID           string `json:"id"`
	Address      string `json:"address"`
	Voter        bool   `json:"voter"`
	Reachability string `json:"reachability,omitempty"`
}

// statusListing is legion status for every format but the table, which
// prints the status as text: the manager reached, one item.
func statusListing(st client.Status) listing {
	v := statusView{Node: st.NodeID, Role: st.Role, Initialized: st.Initialized, State: st.State, Term: st.Term,
		Leader: st.LeaderID, LeaderAddress: st.LeaderAddress, AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, Removed: st.Removed}
	for _, m := range st.Members {
		v.Managers = append(v.Managers, managerView{ID: m.ID, Address: m.Address, Voter: m.Voter, Reachability: m.Reachability})
	}
	l := listing{columns: cols("NODE", "ROLE", "STATE", "LEADER", "MANAGERS"), single: true}
	l.add("node/"+st.NodeID, v, st.NodeID, st.Role, st.State, st.LeaderID, fmt.Sprint(len(st.Members)))
	return l
}

// stackView is a stack as stack ls -o json prints it.
type stackView struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Services  int    `json:"services"`
}

func stackListing(services []legion.Object) listing {
	l := listing{columns: cols("NAME", "NAMESPACE", "SERVICES"), none: "stacks"}
	for _, s := range compose.Stacks(services) {
		l.add("stack/"+s.Name, stackView{s.Name, s.Namespace, s.Services}, s.Name, s.Namespace, fmt.Sprint(s.Services))
	}
	return l
}

// stackServicesListing is stack services: get's service table of the
// stack's services, by name.
func stackServicesListing(stack string, services []legion.Object, now time.Time) listing {
	var mine []legion.Object
	for _, o := range stackMembers(stack, services) {
		if o.GetKind() == legion.KindService {
			mine = append(mine, o)
		}
	}
	l := objectListing(mine, false, false, now)
	l.none = "services"
	return l
}

// stackMembers is the stack's Services, then its Jobs, each by name.
func stackMembers(stack string, objs []legion.Object) []legion.Object {
	var mine []legion.Object
	for _, o := range objs {
		if k := o.GetKind(); (k == legion.KindService || k == legion.KindJob) && compose.InStack(o, stack) {
			mine = append(mine, o)
		}
	}
	slices.SortFunc(mine, func(a, b legion.Object) int {
		if a.GetKind() != b.GetKind() {
			return cmp.Compare(kindOrder(a.GetKind()), kindOrder(b.GetKind()))
		}
		return strings.Compare(a.GetMetadata().Name, b.GetMetadata().Name)
	})
	return mine
}

// kindOrder puts Services before Jobs.
func kindOrder(k legion.Kind) int {
	if k == legion.KindService {
		return 0
	}
	return 1
}

// auditView is an audit event as audit -o json prints it.
type auditView struct {
	Time      time.Time `json:"time"`
	Actor     string    `json:"actor,omitempty"`
	Role      string    `json:"role,omitempty"`
	From      string    `json:"from,omitempty"`
	Action    string    `json:"action"`
	Kind      string    `json:"kind,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	Outcome   string    `json:"outcome"`
	Message   string    `json:"message,omitempty"`
	Manager   string    `json:"manager,omitempty"`
}

// auditListing: -o name gives the object each event is about.
func auditListing(events []client.AuditEvent) listing {
	l := listing{columns: cols("TIME", "ACTOR", "ACTION", "OBJECT", "OUTCOME", "MANAGER", "MESSAGE", "+FROM"), none: "audit events"}
	for _, e := range events {
		name := strings.ToLower(e.Kind) + "/" + e.Name
		if e.Kind == "" {
			name = e.Action + "/" + e.Name
		}
		v := auditView{e.Time.UTC(), e.Actor, e.Role, e.From, e.Action, e.Kind, e.Namespace, e.Name, e.Outcome, e.Message, e.Manager}
		l.add(name, v, e.Time.UTC().Format(time.RFC3339), actorOf(e), e.Action, objectOf(e), e.Outcome, e.Manager, e.Message, e.From)
	}
	return l
}

// imageListing is image ls; the records are what -o json prints.
func imageListing(recs []*image.Record) listing {
	l := listing{columns: cols("REFERENCE", "DIGEST", "PLATFORM", "LAYERS", "ORIGIN", "LAST USED", "+MANIFEST", "+PULLED"), none: "images"}
	for _, r := range recs {
		origin := "pulled"
		if r.Local {
			origin = "loaded"
		}
		if r.Private {
			origin += ", private to " + strings.Join(r.Namespaces, ",")
		}
		l.add("image/"+r.Reference, r, r.Reference, short(r.Digest), r.Platform.OS+"/"+r.Platform.Arch, fmt.Sprint(len(r.Layers)), origin,
			r.LastUsed.UTC().Format(time.RFC3339), short(r.Manifest), r.Pulled.UTC().Format(time.RFC3339))
	}
	return l
}

// caView is ca status as -o json prints it.
type caView struct {
	Digest         string   `json:"digest"`
	PreviousDigest string   `json:"previousDigest,omitempty"`
	Pending        []string `json:"pending,omitempty"`
	Started        bool     `json:"started,omitempty"`
}

// caListing is ca status for every format but the table, which prints it
// as text.
func caListing(r client.CARotation) listing {
	l := listing{columns: cols("CA", "PREVIOUS CA", "PENDING"), single: true}
	l.add("ca/"+r.Digest, caView{r.Digest, r.PreviousDigest, r.Pending, r.Started}, r.Digest, r.PreviousDigest, strings.Join(r.Pending, ","))
	return l
}
