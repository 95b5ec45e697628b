package ingress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// askingPair connects an askingConn to a loopback server running serve on
// its side of the connection.
func askingPair(t *testing.T, serve func(net.Conn)) *askingConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); <-done })
	a := newAskingConn(conn)
	if a.raw == nil {
		t.Fatal("a TCP connection gave no RawConn: requests would be sent and read as usual")
	}
	return a
}

// answerLines answers each line it reads with "got N bytes".
func answerLines(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, "got "+strings.Repeat("x", len(line)-1)+"\n"); err != nil {
			return
		}
	}
}

func TestAskingConnSendsTheRequestWithTheReadOfItsAnswer(t *testing.T) {
	a := askingPair(t, answerLines)
	r := bufio.NewReader(a)
	for _, ask := range []string{"one", "three", ""} {
		if _, err := io.WriteString(a, ask+"\n"); err != nil {
			t.Fatal(err)
		}
		if string(a.pending) != ask+"\n" {
			t.Fatalf("written %q, kept %q: the request went out before its answer was read", ask+"\n", a.pending)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := "got " + strings.Repeat("x", len(ask)) + "\n"; got != want {
			t.Fatalf("answer to %q: %q, want %q", ask, got, want)
		}
		if len(a.pending) != 0 {
			t.Fatalf("%d bytes still kept after the answer came", len(a.pending))
		}
	}
}

// A proxy asks per request: nothing allocated (with a server that
// allocates nothing either, as AllocsPerRun counts the process's).
func TestAskingConnAllocatesNothing(t *testing.T) {
	ok := []byte("ok\n")
	a := askingPair(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			if _, err := r.ReadSlice('\n'); err != nil {
				return
			}
			if _, err := c.Write(ok); err != nil {
				return
			}
		}
	})
	r := bufio.NewReader(a)
	ask := []byte("again\n")
	if n := testing.AllocsPerRun(50, func() {
		a.Write(ask)
		if _, err := r.ReadSlice('\n'); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per request and answer, want none", n)
	}
}

// A request larger than the socket takes at once is sent in part from the
// read, the rest by a plain write.
func TestAskingConnSendsWhatTheSocketCannotTakeAtOnce(t *testing.T) {
	a := askingPair(t, answerLines)
	ask := bytes.Repeat([]byte("y"), 16<<20)
	a.Write(append(ask, '\n'))
	got, err := bufio.NewReaderSize(a, 32<<20).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "got " + strings.Repeat("x", len(ask)) + "\n"; got != want {
		t.Fatalf("answer of %d bytes, want %d", len(got), len(want))
	}
}

// What the transport decides on (a closed kept connection is asked again,
// a backend too slow is a timeout) reads the same as from a net.Conn.
func TestAskingConnErrorsAreNetConnErrors(t *testing.T) {
	t.Run("closed by the backend", func(t *testing.T) {
		closed := make(chan struct{})
		a := askingPair(t, func(c net.Conn) { c.Close(); close(closed) })
		<-closed
		a.Write([]byte("anyone?\n"))
		_, err := a.Read(make([]byte, 64))
		if !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("read after the backend closed: %v, want EOF or a reset", err)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		a := askingPair(t, func(net.Conn) { <-hold })
		a.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		a.Write([]byte("anyone?\n"))
		_, err := a.Read(make([]byte, 64))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past its deadline: %v, want a timeout", err)
		}
		if errorStatus(err) != 504 {
			t.Fatalf("status for it: %d, want 504", errorStatus(err))
		}
	})
}
