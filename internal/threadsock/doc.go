// Package threadsock is a blocking IPv4 UDP socket read and written by one
// goroutine locked to an OS thread of its own, outside Go's poller: DHCP's
// socket reader (dhcp.serveSock) and each lock-step TFTP transfer
// (tftp.threadLink) wait in it.
//
// A blocked read is woken by the kernel on the very thread that then
// answers, as kea, atftpd and in.tftpd do; through the poller each datagram
// costs a failed read, a park, an epoll wake-up and a hand-off between
// threads (see tftp/DESIGN.md#lock-step-threads).
//
// The rules a Sock keeps, in one place:
//   - it is never registered with the poller, so it wakes no polling thread
//     when datagrams come and go;
//   - only its owner (one goroutine, runtime.LockOSThread) reads and
//     writes; Close may come from any goroutine and wakes a blocked read;
//   - every read first yields to Go's scheduler when the owner has not
//     passed through it for YieldEvery (the yield rule, see YieldEvery);
//   - system calls cut short by a signal (EINTR) are made again;
//   - the system calls are closures built once, so a datagram allocates
//     nothing.
//
// It is Linux only; elsewhere DHCP and TFTP read through the poller.
package threadsock
