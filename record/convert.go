package record

import (
	"maps"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/netstate"
)

// Conditions are what a record says that its event does not: who stores
// it, the kernel, the serving interface as read, and what the host table
// knows of the client. FromFetch takes them as values, so the conversion
// is pure; the sink (convert) and the bench gather them.
type Conditions struct {
	Source, Kernel string
	// Iface is the interface the fetch went through as the caller found it
	// (the one holding the fetch's local address: a fetch over loopback is
	// not one over --iface's NIC); "" takes the fetch's Interface.
	Iface string
	// Net is that interface as read (MTU, speed, offloads); nil: unknown.
	Net *netstate.State
	// Arch is the client's architecture as DHCP saw it. Its MAC, host
	// name and host entry labels are on the fetch (hosts.Table.Stamp).
	Arch string
}

// FromFetch converts one fetch event into its record and interval samples:
// the one conversion from event to record, for served fetches and bench
// fetches alike.
func FromFetch(f *event.Fetch, c Conditions) (Record, []Interval) {
	r := Record{
		Time: f.Start.UTC(), Source: c.Source, Proto: f.Proto, Direction: "rx",
		Host: f.Host, File: f.File, Bytes: f.Bytes, Size: f.Size, Duration: f.Duration, Mbps: f.Mbps(),
		Outcome: f.Outcome, Err: f.Err, Kernel: c.Kernel, Kind: f.Kind, Arch: c.Arch,
	}
	if f.Source != "" {
		r.Source = f.Source // iperf3/iperf2 tests
	}
	if f.Direction != "" {
		r.Direction = f.Direction
	}
	if a := f.Client.Addr(); a.IsValid() {
		r.ClientIP = a.Unmap().String()
	}
	if mac := f.MAC; mac != nil {
		r.ClientMAC = mac.String()
	}
	if len(f.Labels) > 0 {
		r.Labels = maps.Clone(f.Labels)
	}
	if u := f.UDP; u != nil {
		r.JitterMs, r.UDPLost, r.UDPPackets, r.UDPLostPct = u.JitterMs, u.Lost, u.Packets, u.LostPct()
	}
	if t := f.Test; t != nil {
		r.ServerBytes, r.ServerWritten, r.ServerDuration, r.ClientClock = t.ServerBytes, t.ServerWritten, t.ServerDuration, t.ClientClock
		if t.ClientReported {
			r.ClientBytes, r.ClientMbps, r.ClientRetransmits = t.ClientBytes, t.ClientMbps, t.ClientRetransmits
		}
	}
	if t := f.TCP; t != nil {
		r.WndMax, r.WndMedian = t.MaxSndWnd, t.MedSndWnd
		r.RTT, r.MinRTT = t.RTT, t.MinRTT
		r.Retransmits = int64(t.Retransmits)
		r.DeliveryRate = t.DeliveryRate
		r.RwndLimited, r.SndbufLimited = t.RWndLimited, t.SndBufLimited
		r.MSS, r.PMTU = t.MSS, t.PMTU
	}
	if t := f.Test; t != nil && !t.ClientReported && f.TCP == nil && f.Proto == event.ProtoTCP && f.Direction == "tx" {
		// The board sent and its results never came: the server, the
		// receiver, cannot know the sender's retransmits.
		r.Retransmits = RetransmitsUnknown
	}
	if t := f.TFTP; t != nil {
		r.BlkSize, r.WindowSize, r.TSize = t.BlockSize, t.WindowSize, t.TSize
		r.Datagrams, r.Retransmits, r.Timeouts = t.Datagrams, t.Retransmits, t.Timeouts
		r.EffWndMin, r.EffWndMedian, r.EffWndMax, r.LossEvents = t.WindowMin, t.WindowMedian, t.WindowMax, t.LossEvents
		r.RTT = t.RTT
		if f.Outcome == event.OutcomeOK {
			// Every distinct block of a completed transfer was acknowledged.
			r.Acked = t.Datagrams - t.Retransmits
		}
	}
	r.Iface = c.Iface
	if r.Iface == "" {
		r.Iface = f.Interface
	}
	if st := c.Net; st != nil {
		r.MTU, r.LinkMbps, r.LinkDriver = st.MTU, st.SpeedMbps, st.Driver
		r.RxCsum, r.TxCsum = Offload(st.RxCsum), Offload(st.TxCsum)
		r.TSO, r.GSO, r.GRO = Offload(st.TSO), Offload(st.GSO), Offload(st.GRO)
	}
	// The path MTU, when TCP knows it, is what the packets were sized to.
	if r.PMTU > 0 && (r.MTU == 0 || int(r.PMTU) < r.MTU) {
		r.MTU = int(r.PMTU)
	}
	r.Kind = Classify(&r)
	var ivs []Interval
	if len(f.Intervals) > 0 {
		ivs = make([]Interval, len(f.Intervals))
		for i, iv := range f.Intervals {
			ivs[i] = Interval{Start: iv.Start, End: iv.End, Bytes: iv.Bytes, Retransmits: iv.Retransmits,
				Cwnd: iv.Cwnd, SndWnd: iv.SndWnd, RTT: iv.RTT}
		}
	}
	return r, ivs
}

// convert builds a Record (and its intervals) from a fetch, gathering the
// conditions as they are now: the host table's view of the client and the
// serving interface's state.
func (s *Sink) convert(f *event.Fetch) (*Record, []Interval) {
	c := Conditions{Source: s.opt.Source, Kernel: s.opt.Kernel, Iface: s.opt.Interface}
	// The host entry's MAC, name and labels are on the event already
	// (serve stamps every event before any sink: hosts.Stamping); the
	// table adds the architecture DHCP saw.
	if hc, ok := s.opt.Hosts.Of(f.MAC, f.Client.Addr()); ok {
		if a, known := configs.ArchByCode(hc.Arch); known {
			c.Arch = a.Name
		}
	}
	iface := s.opt.Addrs.Iface(f.Local)
	if iface == "" {
		iface = f.Interface
	}
	if iface == "" {
		iface = s.opt.Interface
	}
	c.Iface = iface
	if s.opt.Net != nil && iface != "" {
		st, err := s.opt.Net.Get(iface)
		if err != nil {
			s.log.Debug("record: interface state partly unknown", "iface", iface, "err", err)
		}
		c.Net = &st
	}
	r, ivs := FromFetch(f, c)
	return &r, ivs
}
