package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// atftpGet fetches file from srv as atftp 0.8's windowed client does, as
// far as the sender can tell: it ACKs after window blocks in order counted
// since its last ACK (or at the last block), ACKs its position once when a
// block arrives ahead of the one it waits for, ACKs its position for EVERY
// duplicate block it receives, and ACKs its position on its own timeout.
// Its first window's ACK is late: held back until the next DATA arrives,
// after the server's retransmit timer fired (a spurious timeout), and sent
// then, just before the ACK that packet draws. It returns the content and
// how many ACKs it sent for duplicates.
func atftpGet(t *testing.T, srv netip.AddrPort, file string, blksize, window int) ([]byte, int, error) {
	t.Helper()
	conn := loopbackConn(t)
	t.Cleanup(func() { conn.Close() })
	req := rq(opRRQ, file, "octet", "blksize", strconv.Itoa(blksize), "windowsize", strconv.Itoa(window))
	if _, err := conn.WriteToUDPAddrPort(req, srv); err != nil {
		return nil, 0, err
	}
	var (
		peer     netip.AddrPort
		got      bytes.Buffer
		next     = int64(1) // seq of the block awaited
		inWindow int        // blocks in order since the last ACK
		nacked   = int64(-1)
		late     = int64(-1) // a held-back ACK, sent with the next DATA's answer
		heldOnce bool
		dupACKs  int
		timeouts int
	)
	sendACK := func(seq int64) error {
		inWindow = 0
		_, err := conn.WriteToUDPAddrPort(ack(uint16(seq)), peer)
		return err
	}
	buf := make([]byte, 70000)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		m, from, err := conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !peer.IsValid() {
				return nil, 0, errors.New("no answer to the request")
			}
			if timeouts++; timeouts > 20 {
				return nil, 0, fmt.Errorf("gave up after %d timeouts at block %d", timeouts, next)
			}
			if err := sendACK(next - 1); err != nil {
				return nil, 0, err
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if !peer.IsValid() {
			peer = from
		}
		if from != peer || m < 4 {
			continue
		}
		p := buf[:m]
		switch binary.BigEndian.Uint16(p) {
		case opERROR:
			return nil, 0, fmt.Errorf("server error %d %q", binary.BigEndian.Uint16(p[2:]), p[4:])
		case opOACK:
			if next == 1 {
				if err := sendACK(0); err != nil {
					return nil, 0, err
				}
			}
		case opDATA:
			if late >= 0 {
				// The late ACK of the first window goes out now.
				if _, err := conn.WriteToUDPAddrPort(ack(uint16(late)), peer); err != nil {
					return nil, 0, err
				}
				late = -1
			}
			d := int16(binary.BigEndian.Uint16(p[2:]) - uint16(next))
			switch {
			case d < 0:
				// A duplicate: atftp ACKs where it is, every time.
				dupACKs++
				if err := sendACK(next - 1); err != nil {
					return nil, 0, err
				}
				continue
			case d > 0:
				if nacked != next {
					nacked = next
					if err := sendACK(next - 1); err != nil {
						return nil, 0, err
					}
				}
				continue
			}
			got.Write(p[4:])
			inWindow++
			last := m-4 < blksize
			if inWindow == window || last {
				if !heldOnce && !last {
					heldOnce, late, inWindow = true, next, 0
				} else if err := sendACK(next); err != nil {
					return nil, 0, err
				}
			}
			next++
			if last {
				return got.Bytes(), dupACKs, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("not done after a minute, at block %d", next)
}

// TestDuplicateACKNoResendLoop is issue 16's resend loop: atftp ACKs its
// position for every duplicate block, so after one spurious timeout (the
// first window's ACK comes late, after the tail-loss probe, a duplicate)
// the sender saw the same ACK twice. Taking the repeat as a loss, it
// resent the next round, whose duplicates drew as many repeats, which
// resent the round after, to the end of the file: about every block went
// twice on a clean link while losses stayed near 0. After a round sent more
// than once a repeat is now ignored until the next timeout, so the clean
// transfer resends next to nothing.
func TestDuplicateACKNoResendLoop(t *testing.T) {
	const blksize, window = 512, 16
	// The timer's floor at the timeout: no other, truly spurious, timeout
	// on a loaded host; the first round's timer is the timeout anyway
	// (nothing measured yet).
	ts := startServer(t, Config{Timeout: 200 * time.Millisecond, minRTO: 200 * time.Millisecond, MaxWindowSize: window})
	const blocks = 2049
	want := ts.file(t, "f", (blocks-1)*blksize+100)
	got, dups, err := atftpGet(t, ts.Addr(), "f", blksize, window)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (content differs)", len(got), len(want))
	}
	ev := ts.fetches(t, 1)[0]
	t.Logf("client ACKed %d duplicates; %+v", dups, ev.TFTP)
	if ev.Outcome != event.OutcomeOK || ev.Bytes != int64(len(want)) {
		t.Errorf("outcome %q bytes %d; want ok, %d", ev.Outcome, ev.Bytes, len(want))
	}
	if ev.TFTP.Timeouts < 1 {
		t.Errorf("%d timeouts; the late ACK should have forced one", ev.TFTP.Timeouts)
	}
	// Before the fix nearly every block drew a duplicate ACK and was
	// resent (2049 blocks: 1952 duplicates ACKed, 2103 resent). Now the
	// late ACK's repeat is ignored: one duplicate (the probe). The resends
	// left are the probe and the gap blocks of the short rounds while the
	// window regrows after the timeout (each sent again in order in the
	// next round: about 70 here), a few percent of the file.
	if dups > 2*window {
		t.Errorf("the client ACKed %d duplicate blocks; want at most %d (a resend loop on duplicate ACKs)", dups, 2*window)
	}
	if ev.TFTP.Retransmits > blocks/10 {
		t.Errorf("%d blocks resent of %d on a clean link; want at most %d (a resend loop on duplicate ACKs)",
			ev.TFTP.Retransmits, blocks, blocks/10)
	}
}
