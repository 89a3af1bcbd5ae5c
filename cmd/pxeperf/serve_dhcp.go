package main

// newDHCPService builds the DHCP server. Owned by the dhcp work: replace the body.
func newDHCPService(env *serveEnv) (service, error) { return nil, nil }
