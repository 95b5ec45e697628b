package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// ChainIDs computes the chain id of each layer from the config's diff_ids:
// the first is its diff_id, each next sha256(parent + " " + diff_id). A
// layer is stored by chain id, so images built on the same layers share them.
func ChainIDs(diffIDs []string) ([]string, error) {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if err := checkDigest(d); err != nil {
			return nil, fmt.Errorf("rootfs.diff_ids[%d]: %w", i, err)
		}
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out, nil
}

// checkDigest accepts sha256:<64 lower-case hex>, the only kind Legion
// stores under, since chain ids become file and dataset names.
func checkDigest(d string) error {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return fmt.Errorf("digest %q: want sha256:<64 hex digits>", d)
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("digest %q: want lower-case hex", d)
		}
	}
	return nil
}

// hexOf is a digest's hex part, used for file and dataset names.
func hexOf(d string) string { return strings.TrimPrefix(d, "sha256:") }
