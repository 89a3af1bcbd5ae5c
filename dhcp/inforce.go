package dhcp

import "time"

// ProxySightingLife is how long a recorded proxyDHCP answer counts as a
// lease in use: proxy mode hands out no address and no expiry, so a board
// answered within it is taken to be there still.
const ProxySightingLife = 24 * time.Hour

// InForce reports whether a recorded lease is in use at now: a lease of
// full mode until its expiry, a proxyDHCP answer (proxy) for
// ProxySightingLife after it was seen.
func InForce(proxy bool, seen, expiry, now time.Time) bool {
	if proxy {
		return now.Sub(seen) <= ProxySightingLife
	}
	return expiry.After(now)
}
