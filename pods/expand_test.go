package pods

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
		if got := expand(tc.in, lookup); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
