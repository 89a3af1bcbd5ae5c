package httpboot

// Active is how many requests are being served now.
func (s *Server) Active() int64 { return s.active.Load() }

// BadRequests is how many requests were dropped as malformed input (a bad
// ?mac=, ...), as /healthz counts them.
func (s *Server) BadRequests() int64 { return s.badRequests.Load() }
