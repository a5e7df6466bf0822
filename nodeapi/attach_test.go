package nodeapi

import (
	"bytes"
	"testing"
)

func TestCRLFWriter(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"a\n", "a\r\n"},
		{"\n\n", "\r\n\r\n"},
		{"a\r\nb\n", "a\r\nb\r\n"},
	} {
		var b bytes.Buffer
		n, err := crlfWriter{&b}.Write([]byte(tt.in))
		if err != nil || n != len(tt.in) || b.String() != tt.want {
			t.Errorf("Write(%q) = %d, %v, wrote %q; want %q", tt.in, n, err, b.String(), tt.want)
		}
	}
}
