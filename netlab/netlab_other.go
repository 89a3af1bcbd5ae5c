//go:build !linux

package netlab

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os/exec"
	"time"

	"github.com/pxeperf/pxeperf/netstate"
)

// ErrUnsupported: network namespaces exist only on Linux.
var ErrUnsupported = errors.New("netlab: needs Linux network namespaces")

// Testbed is unavailable outside Linux; New always fails.
type Testbed struct {
	ServerNS, ClientNS string
	ServerIf, ClientIf string
	ServerIP, ClientIP netip.Addr
	Prefix             netip.Prefix
}

func New(Options) (*Testbed, error)                   { return nil, ErrUnsupported }
func RunIn(string, func() error) error                { return ErrUnsupported }
func ReapLeftovers(*slog.Logger) ([]string, error)    { return nil, nil }
func (t *Testbed) NS(Side) string                     { return "" }
func (t *Testbed) Iface(Side) string                  { return "" }
func (t *Testbed) IP(Side) netip.Addr                 { return netip.Addr{} }
func (t *Testbed) Run(Side, func() error) error       { return ErrUnsupported }
func (t *Testbed) SetMTU(int) error                   { return ErrUnsupported }
func (t *Testbed) SetRate(Side, uint64) (Rate, error) { return Rate{}, ErrUnsupported }
func (t *Testbed) ClearRate(Side) error               { return ErrUnsupported }
func (t *Testbed) State() (State, error)              { return State{}, ErrUnsupported }
func (t *Testbed) Close() error                       { return nil }
func (t *Testbed) SetOffloads(Side, Offloads) (netstate.State, error) {
	return netstate.State{}, ErrUnsupported
}
func (t *Testbed) Command(ctx context.Context, _ Side, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}

func (t *Testbed) SetDelay(time.Duration) error { return ErrUnsupported }
func (t *Testbed) Delay() (time.Duration, bool) { return 0, false }
func (t *Testbed) DelayStats() DelayStats       { return DelayStats{} }
func (t *Testbed) TakeDelayReport() DelayReport { return DelayReport{} }

// DelayStats counts what the delay line moved (Linux only).
type DelayStats struct {
	Frames, Dropped [2]uint64
}

func (t *Testbed) DelayVia() string { return "" }
