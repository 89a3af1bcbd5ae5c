//go:build !linux

package main

import "github.com/pxeperf/pxeperf/configs"

// checkPrivileges: serve runs on Linux; elsewhere the binds say what fails.
func checkPrivileges(*configs.Config, bool, string) error { return nil }
