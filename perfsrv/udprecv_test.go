package perfsrv

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// TestIperf3UDPRecvDuplicate: an iperf3 UDP stream's receiver counts a
// datagram that came twice as a duplicate, not as a late one filling a
// gap: of 1, 2, 4, 5, 5, 6 one datagram (3) was lost, and the board is
// told so in the result exchange (Errors 1 of 6). iperf_udp_recv's
// counters, which perfsrv kept before measure.UDPRecv, took the second 5
// for the missing 3 and reported 0 lost.
func TestIperf3UDPRecvDuplicate(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	st := &iperf3Stream{id: 1, udp: true, c: srv}
	m := newMeasure(&iperf3Test{p: Params{UDP: true, Bandwidth: 1e6, Len: 100}}, []*iperf3Stream{st})
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.recvUDP(st)
	}()
	seqs := []uint32{1, 2, 4, 5, 5, 6}
	b := make([]byte, 100)
	for i, s := range seqs {
		now := time.Now()
		binary.BigEndian.PutUint32(b[0:], uint32(now.Unix()))
		binary.BigEndian.PutUint32(b[4:], uint32(now.Nanosecond()/1000))
		binary.BigEndian.PutUint32(b[8:], s)
		if _, err := cl.Write(b); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	// Every datagram is read before the receiver is stopped.
	for deadline := time.Now().Add(5 * time.Second); st.bytes.Load() < int64(len(seqs)*len(b)) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	<-done
	if st.bytes.Load() != int64(len(seqs)*len(b)) {
		t.Fatalf("read %d B of %d", st.bytes.Load(), len(seqs)*len(b))
	}
	r := m.results(nil)
	if len(r.Streams) != 1 {
		t.Fatalf("%d streams in the results", len(r.Streams))
	}
	if sr := r.Streams[0]; sr.Errors != 1 || sr.Packets != 6 {
		t.Errorf("results: %d lost of %d packets, want 1 of 6 (3 lost, 5 twice)", sr.Errors, sr.Packets)
	}
}
