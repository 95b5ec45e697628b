package legion

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
)

// CPU is an amount of processor time in thousandths of a CPU (millicores).
// It is written in canonical form: whole CPUs as a plain number ("2"),
// anything else in millicores ("500m"). It reads "0.5", 0.5, "500m", 2.
type CPU int64

// Bytes is an amount of memory or storage in bytes. It is written in
// canonical form: the largest binary unit that divides it exactly ("1Gi"),
// else the largest decimal one ("1G"), else plain bytes. It reads plain
// numbers, binary (Ki Mi Gi Ti Pi Ei) and decimal (k M G T P E) suffixes,
// with a fraction when the result is a whole number of bytes ("1.5Gi").
type Bytes int64

var errNegative = errors.New("must not be negative")

// ParseCPU reads a CPU quantity.
func ParseCPU(s string) (CPU, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty CPU quantity: expected a number of CPUs (0.5, 2) or millicores (500m)")
	}
	if strings.HasSuffix(s, "m") {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil || strings.HasPrefix(s, "+") {
			return 0, fmt.Errorf("invalid CPU quantity %q: expected whole millicores such as 500m", s)
		}
		if n < 0 {
			return 0, fmt.Errorf("invalid CPU quantity %q: %w", s, errNegative)
		}
		return CPU(n), nil
	}
	if n, ok := wholeNumber(s); ok && n <= math.MaxInt64/2/1000 {
		return CPU(n * 1000), nil
	}
	r, ok := parseDecimal(s)
	if !ok {
		return 0, fmt.Errorf("invalid CPU quantity %q: expected a number of CPUs (0.5, 2) or millicores (500m)", s)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("invalid CPU quantity %q: %w", s, errNegative)
	}
	r.Mul(r, big.NewRat(1000, 1))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid CPU quantity %q: finer than 1m (a thousandth of a CPU)", s)
	}
	if !r.Num().IsInt64() || r.Num().Int64() > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid CPU quantity %q: too large", s)
	}
	return CPU(r.Num().Int64()), nil
}

// String returns the canonical form.
func (c CPU) String() string {
	if c%1000 == 0 {
		return strconv.FormatInt(int64(c)/1000, 10)
	}
	return strconv.FormatInt(int64(c), 10) + "m"
}

// Millis returns the amount in millicores.
func (c CPU) Millis() int64 { return int64(c) }

var binaryUnits = []struct {
	suffix string
	shift  uint
}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}}

var decimalUnits = []struct {
	suffix string
	mult   int64
}{{"E", 1e18}, {"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}}

// ParseBytes reads a byte quantity.
func ParseBytes(s string) (Bytes, error) {
	s = strings.TrimSpace(s)
	const expect = "expected bytes as a number with an optional unit (512Mi, 1Gi, 1G, 1073741824)"
	if s == "" {
		return 0, errors.New("empty byte quantity: " + expect)
	}
	num, unit := s, int64(1)
	matched := false
	for _, u := range binaryUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = s[:len(s)-len(u.suffix)], 1<<u.shift
			matched = true
			break
		}
	}
	if !matched {
		for _, u := range decimalUnits {
			if strings.HasSuffix(s, u.suffix) {
				num, unit = s[:len(s)-len(u.suffix)], u.mult
				break
			}
		}
	}
	if n, ok := wholeNumber(num); ok {
		if hi, lo := bits.Mul64(uint64(n), uint64(unit)); hi == 0 && lo <= math.MaxInt64 {
			return Bytes(lo), nil
		}
	}
	mult := big.NewRat(unit, 1)
	r, ok := parseDecimal(num)
	if !ok {
		return 0, fmt.Errorf("invalid byte quantity %q: %s", s, expect)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("invalid byte quantity %q: %w", s, errNegative)
	}
	r.Mul(r, mult)
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid byte quantity %q: not a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("invalid byte quantity %q: too large", s)
	}
	return Bytes(r.Num().Int64()), nil
}

// String returns the canonical form.
func (b Bytes) String() string {
	n := int64(b)
	if n == 0 {
		return "0"
	}
	for _, u := range binaryUnits {
		if n%(int64(1)<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	for _, u := range decimalUnits {
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// wholeNumber reads a plain whole number of at most 18 digits (no sign,
// point or unit), as the canonical forms write them: read without
// big.Rat, since every object decoded holds a few (a container's
// resources are written even when zero).
func wholeNumber(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseDecimal reads a plain decimal number (no exponent, no unit) exactly.
func parseDecimal(s string) (*big.Rat, bool) {
	if s == "" || len(s) > 40 {
		return nil, false
	}
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
		case (c == '-' || c == '+') && i == 0:
		default:
			return nil, false
		}
	}
	if digits == 0 || strings.Count(s, ".") > 1 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func (c CPU) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

func (c *CPU) UnmarshalJSON(b []byte) error {
	s, err := scalarJSON(b)
	if err != nil {
		return err
	}
	v, err := ParseCPU(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

func (c *CPU) decodeScalar(s string) error {
	v, err := ParseCPU(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

func (b Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

func (b *Bytes) UnmarshalJSON(data []byte) error {
	s, err := scalarJSON(data)
	if err != nil {
		return err
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

func (b *Bytes) decodeScalar(s string) error {
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// scalarJSON reads a JSON string or number as text.
func scalarJSON(b []byte) (string, error) {
	if len(b) > 0 && b[0] == '"' {
		return jsonString(b)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return "", fmt.Errorf("expected a string or a number, got %s", b)
	}
	return n.String(), nil
}

// jsonString is the text of a JSON string. One of printable ASCII without
// escapes (what the canonical forms are) is read as it lies, without the
// decoder; any other goes through it.
func jsonString(b []byte) (string, error) {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' {
		plain := true
		for _, c := range b[1 : n-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			return string(b[1 : n-1]), nil
		}
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
