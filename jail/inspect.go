package jail

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

func (j *Jails) status(ctx context.Context, rec Record) (ContainerStatus, error) {
	boot, err := j.bootTime(ctx)
	if err != nil {
		return ContainerStatus{}, err
	}
	run, hasRun, err := j.records.Run(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	exit, hasExit, err := j.records.Exit(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	return Status(rec, run, hasRun, exit, hasExit, boot, j.cfg.Alive), nil
}

// Inspect implements Runtime.
func (j *Jails) Inspect(ctx context.Context, id string) (ContainerStatus, error) {
	rec, err := j.records.Get(id)
	if err != nil {
		return ContainerStatus{}, err
	}
	return j.status(ctx, rec)
}

// List implements Runtime.
func (j *Jails) List(ctx context.Context, selector map[string]string) ([]ContainerStatus, error) {
	ids, err := j.records.IDs()
	if err != nil {
		return nil, err
	}
	var out []ContainerStatus
	for _, id := range ids {
		rec, err := j.records.Get(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !MatchLabels(rec.Spec.Labels, selector) {
			continue
		}
		st, err := j.status(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ErrAmbiguous is returned by Find when a prefix names several containers.
var ErrAmbiguous = errors.New("more than one container matches")

// Find looks a container up by its id or a prefix of it only one has, for
// a local tool.
func (j *Jails) Find(ctx context.Context, ref string) (ContainerStatus, error) {
	if st, err := j.Inspect(ctx, ref); err == nil || !errors.Is(err, ErrNotFound) {
		return st, err
	}
	ids, err := j.records.IDs()
	if err != nil {
		return ContainerStatus{}, err
	}
	var match []string
	for _, id := range ids {
		if ref != "" && strings.HasPrefix(id, ref) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return ContainerStatus{}, fmt.Errorf("container %q: %w", ref, ErrNotFound)
	case 1:
		return j.Inspect(ctx, match[0])
	}
	slices.Sort(match)
	return ContainerStatus{}, fmt.Errorf("container %q: %w: %s", ref, ErrAmbiguous, strings.Join(match, ", "))
}
