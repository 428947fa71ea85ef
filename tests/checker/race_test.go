//go:build race

package checker_test

// raceEnabled: this test binary runs under the race detector, so by
// default the node is built with it too.
const raceEnabled = true
