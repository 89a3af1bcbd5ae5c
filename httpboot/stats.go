package httpboot

// Active is how many requests are being served now.
func (s *Server) Active() int64 { return s.active.Load() }

// BadRequests is how many requests were dropped as malformed input (a bad
// ?mac=, ...), as /healthz counts them.
func (s *Server) BadRequests() int64 { return s.badRequests.Load() }

// Conns is how many client connections are open now, as counted against
// http.max_conns (/healthz's conns).
func (s *Server) Conns() int { return s.conns.count() }
