package main

import (
	"context"
	"io"
	"testing"
	"time"
)

func TestCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n := run(ctx, t.TempDir(), io.Discard); n != 15 {
		t.Fatalf("counter = %d; want 15 (1+2+3+4+5)", n)
	}
}
