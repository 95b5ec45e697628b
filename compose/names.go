package compose

import (
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
)

// dnsLabel turns a compose name into a DNS label: lower case, every run
// of characters a label may not hold becomes one '-', no '-' at either
// end, at most 63 characters. It returns "" when nothing is left.
func dnsLabel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > legion.MaxNameLength {
		out = strings.TrimRight(out[:legion.MaxNameLength], "-")
	}
	return out
}

// objectName makes a compose name an object name, warning at path when it
// had to change, and failing when nothing of it is usable.
func (c *converter) objectName(path, name string) (string, error) {
	if legion.ValidName(name) == nil {
		return name, nil
	}
	label := dnsLabel(name)
	if label == "" {
		return "", fmt.Errorf("%s: %q cannot be made a DNS label (letters, digits and '-')", path, name)
	}
	c.note(path, "name %q becomes %q (a DNS label)", name, label)
	return label, nil
}
