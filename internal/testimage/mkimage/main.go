// Command mkimage writes the test server image as an OCI archive, for
// `legion image load` on a machine without the internet:
//
//	go run ./internal/testimage/mkimage -o hello.tar -ref localhost/hello:v1
//
// It needs the source tree and the go command (it compiles the server).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/legionbsd/legion/internal/testimage"
)

func main() {
	out := flag.String("o", "", "archive to write (required)")
	ref := flag.String("ref", "localhost/legion/test-server:latest", "name of the image in the archive")
	goos := flag.String("goos", "", "target OS (this host's when empty)")
	goarch := flag.String("goarch", "", "target architecture (this host's when empty)")
	env := flag.String("env", "", "comma-separated KEY=VALUE pairs added to the image's environment")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "mkimage: -o is required")
		os.Exit(2)
	}
	o := testimage.Options{GOOS: *goos, GOARCH: *goarch, Cmd: flag.Args()}
	if *env != "" {
		o.Env = strings.Split(*env, ",")
	}
	img, err := testimage.Build(context.Background(), o)
	if err == nil {
		err = testimage.WriteArchive(*out, img, *ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}
