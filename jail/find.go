package jail

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

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
