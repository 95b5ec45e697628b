package jailtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The in-memory runtime runs no programs: it interprets the small subset of
// sh that the conformance suite's commands use, so the same commands run
// for real under /bin/sh in a jail or a process runtime.
//
//	echo WORDS [>&2]   words with $NAME expanded from the environment
//	exit N
//	sleep SECONDS      not interrupted by a trapped signal (as sh defers traps)
//	sleep SECONDS &    then: wait (interrupted by any signal, traps run)
//	trap '' SIG        ignore SIG; trap 'exit N' SIG: exit N on SIG

type stmt struct {
	words []string
}

// parseScript splits a script into statements on ';' and newlines,
// honouring single quotes.
func parseScript(script string) ([]stmt, error) {
	var out []stmt
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	flushWord := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	flushStmt := func() {
		flushWord()
		if len(words) > 0 {
			out = append(out, stmt{words: words})
			words = nil
		}
	}
	for _, c := range script {
		switch {
		case quoted:
			if c == '\'' {
				quoted = false
			} else {
				cur.WriteRune(c)
			}
		case c == '\'':
			quoted, inWord = true, true
		case c == ';' || c == '\n':
			flushStmt()
		case c == '&' && !inWord: // "cmd &" ends a background statement; ">&2" stays a word
			words = append(words, "&")
			flushStmt()
		case c == ' ' || c == '\t':
			flushWord()
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("script %q: unterminated quote", script)
	}
	flushStmt()
	return out, nil
}

func expand(word string, env map[string]string) string {
	return os.Expand(word, func(k string) string { return env[k] })
}

var signalNames = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

// SignalName returns the short name of sig (TERM, KILL, ...).
func SignalName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "KILL"
	}
	for n, s := range signalNames {
		if s == sig {
			return n
		}
	}
	return strconv.Itoa(int(sig))
}

// proc is one interpreted process.
type proc struct {
	env    map[string]string
	out    func(stream, text string)
	sigs   chan syscall.Signal
	traps  map[syscall.Signal]string // "" ignore, "exit N"
	bgDone time.Time
}

// result of a run: exit code and the signal that ended it, if any.
type result struct {
	code   int
	signal syscall.Signal
}

func (p *proc) run(argv []string) result {
	if len(argv) == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh") && argv[1] == "-c" {
		stmts, err := parseScript(argv[2])
		if err != nil {
			p.out("stderr", err.Error())
			return result{code: 2}
		}
		return p.script(stmts)
	}
	p.out("stderr", "unsupported command "+strings.Join(argv, " "))
	return result{code: 127}
}

func (p *proc) script(stmts []stmt) result {
	status := 0
	for _, s := range stmts {
		w := s.words
		switch w[0] {
		case "echo":
			stream, words := "stdout", w[1:]
			if n := len(words); n > 0 && words[n-1] == ">&2" {
				stream, words = "stderr", words[:n-1]
			}
			for i := range words {
				words[i] = expand(words[i], p.env)
			}
			p.out(stream, strings.Join(words, " "))
			status = 0
		case "exit":
			code := 0
			if len(w) > 1 {
				code, _ = strconv.Atoi(w[1])
			}
			return result{code: code}
		case "trap":
			if len(w) < 3 {
				return result{code: 2}
			}
			for _, name := range w[2:] {
				if sig, ok := signalNames[name]; ok {
					p.traps[sig] = w[1]
				}
			}
		case "sleep":
			secs, err := strconv.ParseFloat(w[1], 64)
			if err != nil {
				return result{code: 1}
			}
			d := time.Duration(secs * float64(time.Second))
			if len(w) > 2 && w[2] == "&" {
				p.bgDone = time.Now().Add(d)
				continue
			}
			if r, ended := p.wait(time.Now().Add(d), false); ended {
				return r
			}
		case "wait":
			if r, ended := p.wait(p.bgDone, true); ended {
				return r
			}
		case "true":
			status = 0
		case "false":
			status = 1
		default:
			p.out("stderr", "sh: "+w[0]+": not found")
			status = 127
		}
	}
	return result{code: status}
}

// wait blocks until deadline or a signal that ends the process. With
// interruptible set, a trapped signal runs its action at once.
func (p *proc) wait(deadline time.Time, interruptible bool) (result, bool) {
	var pending []syscall.Signal
	for {
		d := time.Until(deadline)
		if d <= 0 {
			break
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case sig := <-p.sigs:
			t.Stop()
			if sig == syscall.SIGKILL {
				return result{code: 128 + int(sig), signal: sig}, true
			}
			action, trapped := p.traps[sig]
			if !trapped {
				return result{code: 128 + int(sig), signal: sig}, true
			}
			if action == "" {
				continue
			}
			if !interruptible {
				pending = append(pending, sig)
				continue
			}
			return p.trapAction(action), true
		}
	}
	for _, sig := range pending {
		return p.trapAction(p.traps[sig]), true
	}
	return result{}, false
}

func (p *proc) trapAction(action string) result {
	stmts, err := parseScript(action)
	if err != nil {
		return result{code: 2}
	}
	return p.script(stmts)
}
