package legion

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of an object, named by its path
// from the object's root (spec.pod.containers[0].image).
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// ErrorList is every problem found in one object, in the order found.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Err returns the list as an error, or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// maxErrors caps the problems kept for one object, so a hostile manifest
// cannot make the error list itself huge.
const maxErrors = 100

func (l *ErrorList) add(path, format string, args ...any) {
	switch {
	case len(*l) < maxErrors:
		*l = append(*l, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	case len(*l) == maxErrors:
		*l = append(*l, &FieldError{Msg: fmt.Sprintf("more than %d problems; stopped listing them", maxErrors)})
	}
}

func (l *ErrorList) merge(more ErrorList) {
	for _, e := range more {
		if len(*l) > maxErrors {
			return
		}
		l.add(e.Path, "%s", e.Msg)
	}
}

// ObjectError is an ErrorList for one object of a manifest, named by where
// it sits in its source and, when known, its kind and name.
type ObjectError struct {
	Source string // file name, or "-" for standard input
	Index  int    // document number within the source, from 1
	Item   int    // the object's place in a List document, from 1; 0 otherwise
	Kind   Kind
	Name   string // namespace/name or name
	Errs   ErrorList
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	where := fmt.Sprintf("document %d", e.Index)
	if e.Item > 0 {
		where += fmt.Sprintf(", item %d", e.Item)
	}
	if e.Source != "" {
		where = e.Source + ": " + where
	}
	if e.Kind != "" || e.Name != "" {
		where += " (" + strings.TrimSpace(string(e.Kind)+" "+e.Name) + ")"
	}
	for i, fe := range e.Errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(where + ": " + fe.Error())
	}
	return b.String()
}

func (e *ObjectError) Unwrap() error { return e.Errs }

// path helpers keep the field paths uniform.
func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }
