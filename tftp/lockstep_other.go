//go:build !linux

package tftp

import "context"

// defaultLockstepThreads is Config.LockstepThreads' default.
const defaultLockstepThreads = 16

// threadLink is Linux only: elsewhere every transfer waits in the poller.
func (s *Server) threadLink(context.Context, *connLink) link {
	s.polled.Add(1)
	return nil
}
