package process

import "github.com/legionbsd/legion/internal/procstat"

func zombie(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && st.Zombie
}
