// Command server is the program of Legion's test images: a static HTTP
// server whose health the tests switch by touching files, and that can
// print lines and exit with a code instead of serving. internal/testimage
// builds it (CGO_ENABLED=0) and packs it at /app/server.
//
//	GET /       the NAME environment variable, else HOSTNAME's, else the hostname
//	GET /ready  200, or 503 while the -unready file exists
//	GET /live   200, or 500 while the -dead file exists
//	GET /env/K  the value of environment variable K
//
// Flags: -listen ADDR (default :8080, or :$PORT), -say LINE and -err LINE
// (repeated; printed to stdout / stderr before anything else; -repeat N
// prints the -say lines N times), -exit N
// (exit with N after printing, without serving), -whoami (print
// "uid=U gid=G cwd=D" first), -touch PATH and -rm PATH (create or remove
// a file and exit: how tests flip health from inside a container that has
// no other program), -cat PATH (print a file and exit), -get URL (print
// what the URL answers and exit: the pod's own view of names and
// addresses). SIGTERM and SIGINT end it with exit code 0 after saying
// "stopping".
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type lines []string

func (l *lines) String() string     { return strings.Join(*l, "\n") }
func (l *lines) Set(v string) error { *l = append(*l, v); return nil }

func main() { os.Exit(run()) }

func run() int {
	listen := ":8080"
	if p := os.Getenv("PORT"); p != "" {
		listen = ":" + p
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("listen", listen, "address to serve on")
	var say, errs lines
	fs.Var(&say, "say", "line to print to stdout (repeated)")
	fs.Var(&errs, "err", "line to print to stderr (repeated)")
	repeat := fs.Int("repeat", 1, "print the -say lines this many times")
	exit := fs.Int("exit", -1, "exit with this code after printing, without serving")
	whoami := fs.Bool("whoami", false, "print uid, gid and working directory first")
	touch := fs.String("touch", "", "create this file and exit")
	rm := fs.String("rm", "", "remove this file and exit")
	cat := fs.String("cat", "", "print this file and exit")
	get := fs.String("get", "", "print the body of this URL and exit (1 when it fails or answers other than 200)")
	unready := fs.String("unready", "/tmp/unready", "while this file exists /ready fails")
	dead := fs.String("dead", "/tmp/dead", "while this file exists /live fails")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *touch != "" {
		if err := os.WriteFile(*touch, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if *cat != "" {
		data, err := os.ReadFile(*cat)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Stdout.Write(data)
		return 0
	}
	if *get != "" {
		return fetch(*get)
	}
	if *rm != "" {
		if err := os.Remove(*rm); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if *whoami {
		cwd, _ := os.Getwd()
		fmt.Printf("uid=%d gid=%d cwd=%s\n", os.Getuid(), os.Getgid(), cwd)
	}
	out := bufio.NewWriter(os.Stdout)
	for range *repeat {
		for _, l := range say {
			fmt.Fprintln(out, l)
		}
	}
	out.Flush()
	for _, l := range errs {
		fmt.Fprintln(os.Stderr, l)
	}
	if *exit >= 0 {
		return *exit
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		name := os.Getenv("NAME")
		if name == "" {
			name = os.Getenv("HOSTNAME") // the process runtime's stand-in for a hostname of its own
		}
		if name == "" {
			name, _ = os.Hostname()
		}
		fmt.Fprintln(w, name)
	})
	mux.HandleFunc("/ready", fileSwitch(*unready, http.StatusServiceUnavailable))
	mux.HandleFunc("/live", fileSwitch(*dead, http.StatusInternalServerError))
	mux.HandleFunc("/env/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, os.Getenv(strings.TrimPrefix(r.URL.Path, "/env/")))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening on", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintln(os.Stderr, err)
		return 1
	case <-ctx.Done():
	}
	fmt.Println("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	return 0
}

// fetch prints the body of url, resolving its host as the container's
// resolv.conf says: how a test sees what a pod reaches.
func fetch(url string) int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, resp.Status)
		return 1
	}
	return 0
}

// fileSwitch answers 200 unless path exists, then code.
func fileSwitch(path string, code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat(path); err == nil {
			http.Error(w, "switched off by "+path, code)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}
