package legion

import (
	"fmt"
	"strings"
)

// MaxNameLength is the longest object name: one DNS label.
const MaxNameLength = 63

// ValidName checks that s is a DNS label: 1-63 lower-case letters, digits
// and hyphens, starting and ending with a letter or digit.
func ValidName(s string) error {
	if s == "" {
		return fmt.Errorf("missing")
	}
	if len(s) > MaxNameLength {
		return fmt.Errorf("%d characters, at most %d allowed (a DNS label)", len(s), MaxNameLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%q is not a DNS label: only lower-case letters, digits and '-' are allowed", s)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return fmt.Errorf("%q is not a DNS label: it must start and end with a letter or digit", s)
	}
	return nil
}

// validLabelKey checks a label key: an optional DNS-subdomain prefix and
// '/', then a name of at most MaxLabelName letters, digits, '-', '_' and
// '.', starting and ending with a letter or digit.
func validLabelKey(k string) error {
	if len(k) > MaxLabelPrefix+1+MaxLabelName {
		return fmt.Errorf("%d characters, at most %d allowed (a prefix of %d, '/' and a name of %d)",
			len(k), MaxLabelPrefix+1+MaxLabelName, MaxLabelPrefix, MaxLabelName)
	}
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix {
		if prefix == "" || len(prefix) > MaxLabelPrefix {
			return fmt.Errorf("%q: the prefix before '/' must be a DNS name of at most %d characters", k, MaxLabelPrefix)
		}
		for _, part := range strings.Split(prefix, ".") {
			if ValidName(part) != nil {
				return fmt.Errorf("%q: the prefix before '/' must be a DNS name", k)
			}
		}
	}
	if name == "" {
		return fmt.Errorf("%q: missing name", k)
	}
	if err := labelText(name, MaxLabelName); err != nil {
		return fmt.Errorf("%q: %v", k, err)
	}
	return nil
}

// validLabelValue checks a label value: empty, or like a key's name.
func validLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > MaxLabelValue {
		return fmt.Errorf("%d characters, at most %d allowed", len(v), MaxLabelValue)
	}
	if err := labelText(v, MaxLabelValue); err != nil {
		return fmt.Errorf("%q: %v", v, err)
	}
	return nil
}

func labelText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("is %d characters, at most %d allowed", len(s), max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("only letters, digits, '-', '_' and '.' are allowed")
		}
	}
	if !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return fmt.Errorf("must start and end with a letter or digit")
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// MatchLabels reports whether labels hold every pair of the selector; an
// empty selector matches everything.
func MatchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
