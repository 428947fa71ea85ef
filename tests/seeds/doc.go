// Package seeds shows each race of the four seed bug reports
// (docs/SEEDS.md): the same stress test runs against a faithful port
// of the upstream design (tests/baseline) and against agentstate, and the
// same checker judges both. Every test asserts that the checker finds the
// bug in the baseline — a stress test that cannot catch the bug proves
// nothing — and finds none in agentstate.
//
//	seed 000 sessions      TestSeedSessionSequences
//	seed 002 audit         TestSeedAuditSharedSession
//	seed 003 plan history  TestSeedPlanHistory
//	seed 004 engine cache  TestSeedEngineCache
//
// The package holds tests only; docs/SEEDS.md gives the figures observed
// and why agentstate cannot have each bug. Run with
// `go test -race ./tests/seeds/`.
package seeds
