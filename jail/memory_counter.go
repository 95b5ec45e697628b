package jail

import "context"

// MemoryCounter counts a jail's memory once per page (6.3): what the
// runtime reports as a container's memory and what its limit is held to.
type MemoryCounter interface {
	JailMemory(ctx context.Context, jailName string) (int64, error)
}
