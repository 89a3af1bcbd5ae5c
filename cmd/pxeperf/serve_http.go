package main

// newHTTPService builds the HTTP boot server. Owned by the httpboot work: replace the body.
func newHTTPService(env *serveEnv) (service, error) { return nil, nil }
