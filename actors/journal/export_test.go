package journal

// SetReplayPage sets the replay's page size for a test and returns a
// function that restores it.
func SetReplayPage(n int32) (restore func()) {
	old := replayPage
	replayPage = n
	return func() { replayPage = old }
}
