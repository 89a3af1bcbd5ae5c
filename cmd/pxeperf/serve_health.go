package main

// recordHealth is what both /healthz (admin listener and boot port) add
// of the record sink: its problems (none: healthy) and its state. Without
// recording it reports that nothing is recorded.
func (env *serveEnv) recordHealth() (problems []string, records any) {
	if env.records == nil {
		return []string{"recording is off: the record journal could not be opened (see the log at start)"}, nil
	}
	h := env.records.Health()
	return h.Problems, h
}
