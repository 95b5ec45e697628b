package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeItems writes an apply's objects in its order, each as applyOne
// would, but a run of them at a time, proposed together
// (store.PutAllInPlace) rather than each after the one before is
// committed. On a busy cluster every write waits behind the others in the
// log, and waiting once per object made an apply of 200 Services take
// 200 such waits (about 40 s in the scale run, internal/scale).
//
// What stops an apply still stops it before the objects after it:
//   - a run ends at an object whose version the caller named, the only
//     write the state machine may refuse for good (ABORTED);
//   - a write that lost a race to another writer is made again on its own
//     after its run, on top of the newer object, as applyOne does;
//   - an object whose entry cannot be made (too large) refuses the run
//     before any of it is proposed.
//
// What is left, a write the cluster failed to take (a lost leader, a full
// log), is an error the caller cannot know the outcome of either way; the
// error says how many objects were applied, before and after it.
func writeItems(ctx context.Context, st *store.Store, items []applyItem, adm *admission, brief bool) ([]*pb.ApplyResult, error) {
	results := make([]*pb.ApplyResult, len(items))
	for start := 0; start < len(items); {
		end := start
		for end < len(items) && items[end].expected == nil {
			end++
		}
		if end < len(items) {
			end++ // the run ends with the object whose version is named
		}
		if err := writeRun(ctx, st, items, start, end, adm, results, brief); err != nil {
			return nil, err
		}
		start = end
	}
	return results, nil
}

// writeRun writes items[start:end] into results.
func writeRun(ctx context.Context, st *store.Store, items []applyItem, start, end int, adm *admission, results []*pb.ApplyResult, brief bool) error {
	var puts []store.Put
	var at []int    // the item of each put
	var alone []int // items applyOne answers after the run, in order
	for n := start; n < end; n++ {
		it := items[n]
		cur, read := adm.current[legion.ObjectKey(it.obj)]
		if !read {
			var err error
			if cur, err = readCurrent(st, it); err != nil {
				return itemError(items, n, results, err)
			}
		}
		if answersAlone(it, cur) {
			alone = append(alone, n)
			continue
		}
		puts = append(puts, store.Put{Object: it.obj, Options: writeOptions(it, cur)})
		at = append(at, n)
	}
	if len(puts) > 0 {
		prevs, errs, err := st.PutAllInPlace(ctx, puts)
		if err != nil {
			// Nothing of the run was proposed; the error names the object.
			return runError(items, start, results, err)
		}
		failed := -1
		for j, n := range at {
			switch err := errs[j]; {
			case err == nil:
				outcome := Created
				if prevs[j] != nil {
					outcome = Updated
				}
				if results[n], err = resultOf(items[n].obj, prevs[j], outcome, brief); err != nil {
					return err
				}
			case items[n].expected != nil && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists)):
				errs[j] = status.Error(codes.Aborted, err.Error())
				if failed < 0 {
					failed = j
				}
			case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists):
				alone = append(alone, n) // lost a race: written again on top
			default:
				if failed < 0 {
					failed = j
				}
			}
		}
		if failed >= 0 {
			return itemError(items, at[failed], results, errs[failed])
		}
	}
	if len(alone) == 0 {
		return nil
	}
	// One linearizable read for all of them: each is read again after it,
	// so what it answers unchanged is what the cluster agreed on.
	if err := st.Barrier(ctx); err != nil {
		return itemError(items, alone[0], results, err)
	}
	slices.Sort(alone)
	for _, n := range alone {
		obj, prev, outcome, err := applyOne(ctx, st, items[n], false, nil, false, true)
		if err != nil {
			return itemError(items, n, results, err)
		}
		if results[n], err = resultOf(obj, prev, outcome, brief); err != nil {
			return err
		}
	}
	return nil
}

// itemError is the error of an apply that failed at items[n], saying how
// many of the others were applied (results holds their answers; nil for
// a dry run, which applies none).
func itemError(items []applyItem, n int, results []*pb.ApplyResult, err error) error {
	it := items[n]
	name := fmt.Sprintf("%s %s", it.obj.GetKind(), legion.DisplayName(it.obj))
	msg := status.Convert(toStatus(err)).Message()
	if !strings.HasPrefix(msg, name+":") { // the store's errors name it already
		msg = name + ": " + msg
	}
	return status.Error(status.Code(toStatus(err)), msg+appliedNote(n, results))
}

// runError is the error of a run refused before any of it was proposed:
// err names the object.
func runError(items []applyItem, start int, results []*pb.ApplyResult, err error) error {
	st := status.Convert(toStatus(err))
	return status.Error(st.Code(), st.Message()+appliedNote(start, results))
}

// appliedNote says how many objects were applied before item n and after
// it; nothing for a dry run or when none were.
func appliedNote(n int, results []*pb.ApplyResult) string {
	if results == nil {
		return ""
	}
	before, after := 0, 0
	for i, r := range results {
		switch {
		case r == nil || i == n:
		case i < n:
			before++
		default:
			after++
		}
	}
	switch {
	case after > 0:
		return fmt.Sprintf(" (%d of %d objects applied before it, %d after it)", before, len(results), after)
	case before > 0:
		return fmt.Sprintf(" (%d of %d objects applied before it)", before, len(results))
	}
	return ""
}
