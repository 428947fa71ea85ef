package e2e_test

// peerEnv, when set, makes the test binary act as a Proto.Actor peer (see
// remote_test.go) instead of running tests.
const peerEnv = "E2E_REMOTE_PEER"

func runPeer() int { return 1 }
