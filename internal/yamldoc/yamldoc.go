// Package yamldoc counts the documents of a YAML stream, for decoders that
// accept exactly one (the configuration file, a static pod manifest).
package yamldoc

import (
	"bytes"
	"errors"
	"io"

	yamlv2 "go.yaml.in/yaml/v2"
)

// Count returns how many non-empty documents data holds, stopping once it
// has seen more than limit (limit ≤ 0: count them all). A syntax error is
// returned as the YAML parser reports it (with its line number).
func Count(data []byte, limit int) (int, error) {
	d := yamlv2.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if v != nil {
			n++
		}
		if limit > 0 && n > limit {
			return n, nil
		}
	}
}
