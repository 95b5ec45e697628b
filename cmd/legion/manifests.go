package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/legionbsd/legion"
)

// readManifests reads and admits the objects of a file, of every .yaml,
// .yml and .json file under a directory (in name order), or of standard
// input for "-". It returns every object that passed and an error naming
// each that did not.
func readManifests(stdin io.Reader, arg string) ([]legion.Object, error) {
	if arg == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return legion.ParseManifest("-", data)
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
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs, err := legion.ParseManifest(f, data)
		all = append(all, objs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}
