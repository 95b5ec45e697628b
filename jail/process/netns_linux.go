package process

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/legionbsd/legion/jail"
)

// netnsSupported: Linux enters network namespaces with setns(2).
const netnsSupported = true

// startInNetNS runs start on a thread of its own moved into the namespace
// at path: setns changes only the calling thread, and a child forked from
// it is born in that thread's namespace. The thread stays locked and ends
// with its goroutine, so no other goroutine ever runs in the namespace.
func startInNetNS(path string, start func() (jail.Process, error)) (jail.Process, error) {
	type result struct {
		p   jail.Process
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		f, err := os.Open(path)
		if err != nil {
			done <- result{err: &jail.StartError{Err: fmt.Errorf("network namespace: %w", err)}}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: &jail.StartError{Err: fmt.Errorf("entering network namespace %s: %w", path, err)}}
			return
		}
		p, err := start()
		done <- result{p, err}
	}()
	r := <-done
	return r.p, r.err
}
