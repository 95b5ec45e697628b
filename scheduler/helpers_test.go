package scheduler_test

import (
	"strings"
	"time"

	"github.com/legionbsd/legion/scheduler"
)

func schedtestPlan(st scheduler.State, now time.Time) scheduler.Result {
	return scheduler.Plan(st, now)
}

func stringsReplace(s, old, new string) string { return strings.Replace(s, old, new, 1) }
