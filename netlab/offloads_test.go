package netlab

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pxeperf/pxeperf/netstate"
)

func TestNotApplied(t *testing.T) {
	allOn := netstate.State{RxCsum: "on", TxCsum: "on", TSO: "on", GSO: "on", GRO: "on"}
	tests := map[string]struct {
		ask  Offloads
		st   netstate.State
		want []string // nil: no error
	}{
		"nothing asked":          {Offloads{}, netstate.State{}, nil},
		"all on, all on":         {AllOffloads(true), allOn, nil},
		"tx off drops tso, fine": {Offloads{TxCsum: Off()}, netstate.State{TxCsum: "off", TSO: "off"}, nil},
		"tso on without tx": {
			Offloads{TxCsum: Off(), TSO: On()}, netstate.State{TxCsum: "off", TSO: "off"},
			[]string{"tso asked on, active off"},
		},
		"unsupported gro": {
			Offloads{GRO: On(), RxCsum: Off()}, netstate.State{RxCsum: "off"},
			[]string{"gro asked on, active unsupported"},
		},
		"all off, two stuck": {
			AllOffloads(false), netstate.State{RxCsum: "on", TxCsum: "off", TSO: "off", GSO: "on", GRO: "off"},
			[]string{"rx asked off, active on", "gso asked off, active on"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := notApplied(Client, tc.ask, tc.st)
			var got []string
			var na *NotAppliedError
			if errors.As(err, &na) {
				got = na.Features
				if na.Side != Client {
					t.Errorf("side %v, want client", na.Side)
				}
			} else if err != nil {
				t.Fatalf("error %v is not a *NotAppliedError", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
