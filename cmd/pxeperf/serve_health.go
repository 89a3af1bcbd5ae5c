package main

import "slices"

// recordHealth is what both /healthz (admin listener and boot port) add
// of the record sink: its problems (none: healthy) and its state, and the
// webhook's problems. Without recording it reports that nothing is
// recorded.
func (env *serveEnv) recordHealth() (problems []string, records any) {
	if env.records == nil {
		return append([]string{"recording is off: the record journal could not be opened (see the log at start)"}, env.eventProblems()...), nil
	}
	h := env.records.Health()
	return append(slices.Clip(h.Problems), env.eventProblems()...), h
}
