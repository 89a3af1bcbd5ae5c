//go:build !linux

package dhcp

// processCPU is not measured off Linux: benchDORA reports no cpu-ns/op.
func processCPU() int64 { return 0 }
