package scheduler_test

import (
	"time"

	"github.com/legionbsd/legion/scheduler"
)

func schedtestPlan(st scheduler.State, now time.Time) scheduler.Result { return scheduler.Plan(st, now) }
