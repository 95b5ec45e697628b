package legion

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a length of time written in canonical form: hours, minutes,
// seconds and milliseconds, zero parts left out ("1m30s", "500ms", "1h",
// "0s"). It reads Go duration syntax ("90s", "1.5m", "1h0m0s").
type Duration time.Duration

// ParseDuration reads a non-negative duration.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: expected a number with a unit such as 500ms, 5s, 1m30s or 2h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: %w", s, errNegative)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("invalid duration %q: finer than a millisecond", s)
	}
	return Duration(d), nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the canonical form.
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 {
		return "0s"
	}
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
		v = -v
	}
	parts := []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}}
	for _, p := range parts {
		if n := v / p.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(p.name)
			v -= n * p.unit
		}
	}
	if v > 0 { // below a millisecond: only reachable from Go code, never from admission
		b.WriteString(strconv.FormatInt(int64(v), 10) + "ns")
	}
	return b.String()
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := jsonString(b)
	if err != nil {
		return fmt.Errorf("expected a duration string such as 5s, got %s", b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func (d *Duration) decodeScalar(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
