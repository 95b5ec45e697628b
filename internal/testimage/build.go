package testimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ServerPath is where the server is in the image.
const ServerPath = "/app/server"

// serverDir is the directory of the server's source, next to this file.
func serverDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testimage: cannot find the server's source (no caller information)")
	}
	dir := filepath.Join(filepath.Dir(file), "server")
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		return "", fmt.Errorf("testimage: server source: %w", err)
	}
	return dir, nil
}

// goCommand is the go command of the toolchain running us, else the
// first on PATH.
func goCommand() (string, error) {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testimage: the go command is needed to build the server: %w", err)
	}
	return p, nil
}

// BuildServer compiles the server for goos/goarch (the host's when empty)
// as a static binary at out.
func BuildServer(ctx context.Context, out, goos, goarch string) error {
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	dir, err := serverDir()
	if err != nil {
		return err
	}
	gocmd, err := goCommand()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, gocmd, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("testimage: go build of the server for %s/%s: %w: %s", goos, goarch, err, stderr.String())
	}
	return nil
}
