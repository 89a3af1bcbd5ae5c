// Command pxeperf is a network-boot server (DHCP, TFTP, HTTP boot) that
// measures every image a client fetches. See README.md.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pxeperf:", err)
		os.Exit(1)
	}
}
