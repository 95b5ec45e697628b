package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// readManifests reads and admits the objects of each -f given, in turn
// (readManifest). It returns every object that passed and an error naming
// each that did not.
func readManifests(stdin io.Reader, args []string, ns string) ([]legion.Object, error) {
	if len(args) == 0 {
		return nil, errors.New("-f FILE|DIR|URL|- is required")
	}
	stdins := 0
	for _, a := range args {
		if a == "-" {
			stdins++
		}
	}
	if stdins > 1 {
		return nil, errors.New("-f -: standard input is read once, so it is given once")
	}
	var all []legion.Object
	var errs []error
	for _, a := range args {
		objs, err := readManifest(stdin, a, ns)
		all = append(all, objs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// manifestFetch bounds how long reading a manifest from a URL takes.
const manifestFetch = 30 * time.Second

// readManifest reads and admits the objects of a file, of every .yaml,
// .yml and .json file under a directory (in name order), of an http(s)
// URL, as kubectl apply -f fetches one, or of standard input for "-".
func readManifest(stdin io.Reader, arg, ns string) ([]legion.Object, error) {
	if strings.HasPrefix(arg, "https://") || strings.HasPrefix(arg, "http://") {
		data, err := fetchManifest(arg)
		if err != nil {
			return nil, err
		}
		return legion.ParseManifestIn(arg, data, ns)
	}
	if arg == "-" {
		data, err := readLimited(stdin, "standard input")
		if err != nil {
			return nil, err
		}
		return legion.ParseManifestIn("-", data, ns)
	}
	info, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	files := []string{arg}
	if info.IsDir() {
		files = nil
		err := filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != arg && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", arg)
		}
	}
	var all []legion.Object
	var errs []error
	for _, f := range files {
		data, err := readManifestFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs, err := legion.ParseManifestIn(f, data, ns)
		all = append(all, objs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// fetchManifest reads a manifest from an http(s) URL, refusing an answer
// other than 200 and one larger than a manifest may be.
func fetchManifest(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), manifestFetch)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %w", err) // the error names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: the server answered %s", url, resp.Status)
	}
	return readLimited(resp.Body, url)
}

// readManifestFile reads a manifest file of at most legion.MaxManifestSize
// bytes; a larger one is refused by its size, unread.
func readManifestFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > legion.MaxManifestSize {
		return nil, fmt.Errorf("%s: %d bytes, at most %d (%d MiB) allowed in a manifest", name, info.Size(), legion.MaxManifestSize, legion.MaxManifestSize>>20)
	}
	return readLimited(f, name)
}

// readLimited reads r to its end, or refuses it once it has given more
// than legion.MaxManifestSize bytes: a pipe or device has no size to check
// first.
func readLimited(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, legion.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > legion.MaxManifestSize {
		return nil, fmt.Errorf("%s: more than %d bytes, at most %d (%d MiB) allowed in a manifest", name, legion.MaxManifestSize, legion.MaxManifestSize, legion.MaxManifestSize>>20)
	}
	return data, nil
}
