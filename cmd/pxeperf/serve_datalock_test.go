package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second serve on the same --data is refused at start, naming the folder
// and the process holding it, before it touches anything in the folder
// (the first one's cache temp files stay).
func TestServeSecondOnSameDataRefused(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	args := []string{"serve", "--admin-addr", "off", "--iface", "lo", "--addr", "127.0.0.1", "--dhcp", "off",
		"--tftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--root", filepath.Join(dir, "images"), "--data", data}
	ctx1, stop1 := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		first <- cmd.ExecuteContext(ctx1)
	}()
	t.Cleanup(func() {
		stop1()
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Error("first serve did not stop")
		}
	})
	up := false
	for range 300 {
		if _, err := os.Stat(filepath.Join(data, "records.journal")); err == nil {
			up = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !up {
		t.Fatal("first serve did not start")
	}
	tmp := filepath.Join(data, "cache", "0123.img.tmp42")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("being unpacked"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx2, stop2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop2()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx2)
	if err == nil {
		t.Fatal("a second serve on the same --data ran")
	}
	abs, _ := filepath.Abs(data)
	if !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("error %q does not name the folder %s and the process holding it", err, abs)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("the first serve's cache temp file is gone: %v", err)
	}
}
