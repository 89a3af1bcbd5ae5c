package event

import (
	"net"
	"time"
)

// Milestone is a step in a board's boot, or a change to what it boots, as
// automation (a CI job, a board farm) waits for it: the admin event stream,
// the webhook and records of kind "event" carry them.
type Milestone struct {
	Time time.Time
	MAC  net.HardwareAddr
	Host string // the host entry's name, "" when none
	What string // one of the Milestone* constants
	// Detail says more, as flat strings: the file fetched, the next boot's
	// kernel, the address leased, where a change came from.
	Detail map[string]string
}

// What a Milestone says happened.
const (
	MilestoneHostSet          = "host-set"           // a host entry was created or changed at run time
	MilestoneHostDeleted      = "host-deleted"       // a run-time host entry was removed
	MilestoneNextBootSet      = "next-boot-set"      // a next boot was set
	MilestoneNextBootCleared  = "next-boot-cleared"  // a next boot was removed by a person or job
	MilestoneNextBootConsumed = "next-boot-consumed" // a once next boot was taken by the board and cleared
	MilestoneDHCPAck          = "dhcp-ack"           // the board was given its address (or proxy boot reply)
	MilestoneLoaderFetched    = "loader-fetched"     // the board fetched a boot binary
	MilestoneKernelFetched    = "kernel-fetched"     // the board fetched the kernel it was told to boot
)

// MilestoneSink takes milestones. Like Sink, Milestone must not block a
// boot: a slow consumer queues within a bound or drops, counted.
type MilestoneSink interface {
	Milestone(Milestone)
}
