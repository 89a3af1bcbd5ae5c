package datalock

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestSecondOwnerRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Acquire: %v; want ErrInUse naming %s and pid %d", err, dir, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}
