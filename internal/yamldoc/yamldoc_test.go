package yamldoc

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		in      string
		limit   int
		want    int
		wantErr bool
	}{
		{"", 0, 0, false},
		{"# only a comment\n", 0, 0, false},
		{"a: 1\n", 0, 1, false},
		{"---\na: 1\n---\n", 0, 1, false},
		{"a: 1\n---\nb: 2\n---\nc: 3\n", 0, 3, false},
		{"a: 1\n---\nb: 2\n---\nc: 3\n", 1, 2, false},
		{"a: [1\n", 0, 0, true},
	} {
		got, err := Count([]byte(tc.in), tc.limit)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("Count(%q, %d) = %d, %v; want %d, error %v", tc.in, tc.limit, got, err, tc.want, tc.wantErr)
		}
	}
}
