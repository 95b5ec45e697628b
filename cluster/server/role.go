package server

// Role is what the daemon serves as: "manager" (once its store is open),
// "worker", "locked" (sealed keys, waiting for unlock), or "" before init
// or join. A manager's credentials appear before its store opens, so the
// agent waits for the role rather than the credentials to tell the two
// apart.
func (s *Server) Role() string { return s.role() }

// The roles Role reports.
const (
	RoleManager = roleManager
	RoleWorker  = roleWorker
	RoleLocked  = roleLocked
)

// Majority is how many of a cluster's voters must answer for it to elect
// a leader and commit a write: status, the no-leader answer and the CLI
// all count by it.
func Majority(voters int) int { return voters/2 + 1 }
