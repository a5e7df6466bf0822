package containerspec

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "a", "EMPTY": "", "B": "$(A)"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(A)z", "xayaz"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$(EMPTY)|", "|"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$(A", "$(A"},
		{"cost $5", "cost $5"},
		{"end$", "end$"},
		{"$()", "$()"},
		{"$(B)", "$(A)"}, // values are not expanded twice
	} {
		if got := Expand(tc.in, lookup); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSubPathExpander(t *testing.T) {
	exp := subPathExpander(envLookup([]string{"POD=web-1", "NS=default", "EMPTY="}))
	for _, tt := range []struct{ in, want, err string }{
		{"$(NS)/$(POD)", "default/web-1", ""},
		{"logs", "logs", ""},
		{"$$(POD)", "$(POD)", ""},
		{"$(NOPE)/$(EMPTY)", "", "missing value for EMPTY, NOPE"},
	} {
		got, err := exp(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: %v, want error %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
