package main

import (
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{0, 1}, {50, 3}, {90, 5}, {100, 5}} {
		if got := pct(ds, tc.p); got != tc.want {
			t.Errorf("pct(%v, %d) = %v, want %v", ds, tc.p, got, tc.want)
		}
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("pct(nil) = %v", got)
	}
}

func TestValidate(t *testing.T) {
	if err := validate("", "/bin/true", "", 1); err == nil {
		t.Error("no cluster dir accepted")
	}
	if err := validate("/tmp", "", "", 1); err == nil {
		t.Error("no agent accepted")
	}
	if err := validate("/tmp", "/bin/true", "", 0); err == nil {
		t.Error("0 rounds accepted")
	}
	if err := validate("/tmp", "/bin/true", "/nonexistent", 1); err == nil {
		t.Error("missing baseline accepted")
	}
	if err := validate("/tmp", "/bin/true", "/bin/true", 3); err != nil {
		t.Errorf("valid flags refused: %v", err)
	}
}
