package server

// Role is what the daemon serves as: "manager" (once its store is open),
// "worker", "locked" (sealed keys, waiting for unlock), or "" before init
// or join. A manager's credentials appear before its store opens, so the
// agent waits for the role rather than the credentials to tell the two
// apart.
func (s *Server) Role() string { return s.role() }
