// Package hwaddr reads hardware addresses written as hex byte pairs with
// one separator, of any length net.ParseMAC refuses (it takes only 6, 8
// and 20 bytes and any of its separators): the lease journal's addresses
// (dhcp) and the MAC in pxelinux and GRUB config names (bootcfg).
package hwaddr

import "net"

// MaxLen is the longest address Parse reads, in bytes: net.ParseMAC's
// longest (IPoIB); DHCP's chaddr holds up to 16.
const MaxLen = 20

// Parse reads an address of 1 to MaxLen bytes written as two hex digits a
// byte, in either case, separated by sep: Parse("aa:bb:cc", ':') or
// Parse("01-02-03-04-05-06", '-'). ok is false for anything else.
func Parse(s string, sep byte) (addr net.HardwareAddr, ok bool) {
	if len(s) < 2 || (len(s)+1)%3 != 0 || len(s) > MaxLen*3-1 {
		return nil, false
	}
	out := make(net.HardwareAddr, 0, (len(s)+1)/3)
	for i := 0; i < len(s); i += 3 {
		if i+2 < len(s) && s[i+2] != sep {
			return nil, false
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		out = append(out, hi<<4|lo)
	}
	return out, true
}

// IsHex reports whether every byte of s is a hex digit, in either case
// ("" is).
func IsHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := unhex(s[i]); !ok {
			return false
		}
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
