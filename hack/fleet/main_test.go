package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitReadyWaitsForTheAPIServer(t *testing.T) {
	calls := 0
	err := waitReady(context.Background(), func(context.Context) error {
		calls++
		if calls < 2 {
			return errors.New("not ready")
		}
		return nil
	}, time.Minute)
	if err != nil || calls != 2 {
		t.Fatalf("waitReady = %v after %d calls, want nil after 2", err, calls)
	}
}

func TestWaitReadyGivesUpAtItsLimit(t *testing.T) {
	notReady := errors.New("not ready")
	start := time.Now()
	err := waitReady(context.Background(), func(context.Context) error { return notReady }, 500*time.Millisecond)
	if !errors.Is(err, notReady) {
		t.Fatalf("waitReady = %v, want the last readiness error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("waitReady took %v with a 500ms limit", took)
	}
}
