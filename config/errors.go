package config

import (
	"strconv"
	"strings"
)

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Source is the file the problem is in, "flag --NAME" for a flag, or ""
	// when it cannot be attributed (for example a cross-field rule between
	// defaults).
	Source string
	// Line is the line in Source of the field (or its closest parent), or 0
	// if unknown.
	Line int
	// Field is the field path ("pleg.relistPeriod", "evictionHard[memory.available]"),
	// or "" when the problem concerns the whole file.
	Field string
	// Detail says what is wrong, in the style of Kubernetes validation
	// ("Invalid value: -1: must be greater than 0").
	Detail string
	// Err is the underlying error, if any (for errors.Is).
	Err error
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		if p.Line > 0 {
			b.WriteString(":" + strconv.Itoa(p.Line))
		}
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Detail)
	return b.String()
}

// Error is returned by Load when the configuration cannot be used. It
// carries every problem found, not just the first.
type Error struct {
	Problems []Problem
}

// Lines returns one line per problem.
func (e *Error) Lines() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.String()
	}
	return out
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0].String()
	}
	return "invalid configuration (" + strconv.Itoa(len(e.Problems)) + " problems):\n  " + strings.Join(e.Lines(), "\n  ")
}

// Unwrap returns the underlying errors, so that errors.Is(err, fs.ErrNotExist)
// works.
func (e *Error) Unwrap() []error {
	var out []error
	for _, p := range e.Problems {
		if p.Err != nil {
			out = append(out, p.Err)
		}
	}
	return out
}
