package jail

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion/sys"
)

// RctlRules are the rules limiting one container's jail. Limits go on each
// container's own jail: rules on the pod's jail count its children but do
// not hold them (S2). Memory is enforced by the runtime's own count (6.3);
// the per-process rule is the backstop for when the count cannot be read.
func RctlRules(jailName string, r Resources) []string {
	subject := "jail:" + jailName + ":"
	var rules []string
	if r.CPUMillis > 0 {
		// pcpu is a percentage of one CPU.
		pct := (r.CPUMillis + 9) / 10
		rules = append(rules, subject+"pcpu:deny="+strconv.FormatInt(pct, 10))
	}
	if r.MaxProc > 0 {
		rules = append(rules, subject+"maxproc:deny="+strconv.FormatInt(r.MaxProc, 10))
	}
	if r.OpenFiles > 0 {
		rules = append(rules, subject+"openfiles:deny="+strconv.FormatInt(r.OpenFiles, 10))
	}
	if r.MemoryBytes > 0 {
		rules = append(rules, subject+"memoryuse:sigkill="+strconv.FormatInt(r.MemoryBytes, 10)+"/process")
	}
	return rules
}

// AddRctl adds the rules; adding a rule again replaces it, so this is run
// after every start and for adopted containers.
func AddRctl(ctx context.Context, r sys.Runner, jailName string, res Resources) error {
	for _, rule := range RctlRules(jailName, res) {
		if _, err := sys.Run(ctx, r, "rctl", "-a", rule); err != nil {
			return fmt.Errorf("limits of jail %s: %w", jailName, err)
		}
	}
	return nil
}

// RemoveRctl removes every rule of a jail. rctl answers "No such process"
// when the jail has none, which is success.
func RemoveRctl(ctx context.Context, r sys.Runner, jailName string) error {
	_, err := sys.Run(ctx, r, "rctl", "-r", "jail:"+jailName)
	if err != nil && !sys.IsExit(err, "No such process") {
		return fmt.Errorf("remove limits of jail %s: %w", jailName, err)
	}
	return nil
}

// RctlUsage reads `rctl -u jail:NAME`. An unknown jail reads as zeros.
func RctlUsage(ctx context.Context, r sys.Runner, jailName string) (Usage, error) {
	res, err := sys.Run(ctx, r, "rctl", "-u", "jail:"+jailName)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of jail %s: %w", jailName, err)
	}
	return ParseRctlUsage(string(res.Stdout))
}

// ParseRctlUsage reads rctl's key=value lines (amounts in bytes, cputime
// in seconds).
func ParseRctlUsage(out string) (Usage, error) {
	var u Usage
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("rctl usage %s=%q: expected a number", k, v)
		}
		switch k {
		case "cputime":
			u.CPUTime = time.Duration(n) * time.Second
		case "memoryuse":
			u.MemoryBytes = n
		case "maxproc":
			u.Processes = n
		case "openfiles":
			u.OpenFiles = n
		}
	}
	return u, nil
}
