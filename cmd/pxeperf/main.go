// Command pxeperf is a network-boot server (DHCP, TFTP, HTTP boot) that
// measures every image a client fetches. See README.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
