//go:build race

package e2e_test

// raceEnabled: the node binary is built with -race too, so data races in
// the node under load fail its process (and the test).
const raceEnabled = true
