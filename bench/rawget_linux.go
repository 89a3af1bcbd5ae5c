//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawGet sends an HTTP/1.1 GET on c and reads the response to its end the
// way a boot loader polls its NIC: on an OS thread of its own with 1 ns
// timer slack and, where allowed, SCHED_FIFO, waiting in a raw ppoll that
// keeps the thread's Go P. The client's window is SO_RCVBUF, which closes
// while the client has not read; a Go reader that waits for the scheduler
// on a loaded host would add that wait to every round trip and the
// window/RTT model would measure the host, not the link. It returns the
// body bytes, the status code, when the request was written and when the
// last byte arrived.
func rawGet(ctx context.Context, c *net.TCPConn, host, path string) (body int64, status int, wrote, end time.Time, err error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: pxeperf-bench\r\nConnection: close\r\n\r\n"
	if _, err = c.Write([]byte(req)); err != nil {
		return 0, 0, wrote, end, fmt.Errorf("sending the request: %w", err)
	}
	wrote = time.Now()
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, wrote, end, err
	}
	type result struct {
		body   int64
		status int
		end    time.Time
		err    error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's policy dies with it
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 5}, 0)
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1) // this thread keeps its P while it waits
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) - 1)
		var r result
		cerr := rc.Read(func(fd uintptr) bool {
			r.body, r.status, r.end, r.err = rawRead(ctx, int(fd))
			return true
		})
		r.err = errors.Join(r.err, cerr)
		done <- r
	}()
	res := <-done
	return res.body, res.status, wrote, res.end, res.err
}

// rawRead reads a response on a non-blocking socket: headers, then the body
// to Content-Length (or EOF).
func rawRead(ctx context.Context, fd int) (body int64, status int, end time.Time, err error) {
	buf := make([]byte, 256<<10)
	var head []byte
	length := int64(-1)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch {
		case errno == unix.EAGAIN || errno == unix.EINTR:
			if ctx.Err() != nil {
				return body, status, end, context.Cause(ctx)
			}
			pfd[0].Revents = 0
			unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			continue
		case errno != 0:
			return body, status, end, fmt.Errorf("reading the body: %w", errno)
		case n == 0:
			end = time.Now()
			if status == 0 {
				return body, status, end, errors.New("the connection closed before the response headers")
			}
			return body, status, end, nil
		}
		chunk := buf[:n]
		if status == 0 {
			head = append(head, chunk...)
			i := bytes.Index(head, []byte("\r\n\r\n"))
			if i < 0 {
				if len(head) > 64<<10 {
					return 0, 0, end, errors.New("response headers over 64 KiB")
				}
				continue
			}
			if status, length, err = parseHead(head[:i]); err != nil {
				return 0, status, end, err
			}
			chunk = head[i+4:]
		}
		body += int64(len(chunk))
		if length >= 0 && body >= length {
			return body, status, time.Now(), nil
		}
	}
}

// parseHead reads the status code and Content-Length (-1: none).
func parseHead(h []byte) (status int, length int64, err error) {
	lines := bytes.Split(h, []byte("\r\n"))
	f := bytes.Fields(lines[0])
	if len(f) < 2 || !bytes.HasPrefix(f[0], []byte("HTTP/1.")) {
		return 0, -1, fmt.Errorf("not an HTTP/1 status line: %q", lines[0])
	}
	if status, err = strconv.Atoi(string(f[1])); err != nil {
		return 0, -1, fmt.Errorf("status line %q: %w", lines[0], err)
	}
	length = -1
	for _, l := range lines[1:] {
		k, v, ok := bytes.Cut(l, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
			if length, err = strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err != nil {
				return status, -1, fmt.Errorf("Content-Length %q: %w", v, err)
			}
		}
	}
	return status, length, nil
}
