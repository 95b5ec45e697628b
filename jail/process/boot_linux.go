package process

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
)

// bootID names the current boot: runs recorded under another one are
// over. Linux gives each boot a random id.
func bootID() (int64, error) {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, fmt.Errorf("boot id: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(strings.TrimSpace(string(data))))
	return int64(h.Sum64() >> 1), nil // kept positive
}
