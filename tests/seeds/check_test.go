package seeds_test

import "testing"

// checkDense reports how far seqs is from a permutation of 0..len(seqs)-1:
// dups counts the surplus copies of values seen more than once, gaps counts
// the values of 0..len(seqs)-1 that are missing. seqs is exactly
// 0..len(seqs)-1 (in some order) if and only if both are zero.
func checkDense(seqs []int64) (dups, gaps int) {
	seen := make(map[int64]int, len(seqs))
	for _, s := range seqs {
		if seen[s]++; seen[s] > 1 {
			dups++
		}
	}
	for i := range int64(len(seqs)) {
		if seen[i] == 0 {
			gaps++
		}
	}
	return dups, gaps
}

// checkExactlyOnce compares what was accepted with what is stored: lost
// counts accepted items not stored, dups the surplus copies of stored ones,
// and alien the stored items nobody had accepted.
func checkExactlyOnce(accepted, stored []string) (lost, dups, alien int) {
	want := make(map[string]bool, len(accepted))
	for _, a := range accepted {
		want[a] = true
	}
	seen := make(map[string]int, len(stored))
	for _, s := range stored {
		seen[s]++
		switch {
		case !want[s]:
			alien++
		case seen[s] > 1:
			dups++
		}
	}
	for a := range want {
		if seen[a] == 0 {
			lost++
		}
	}
	return lost, dups, alien
}

// The checkers are the tests' eyes: each must see every defect it is meant
// to see.
func TestCheckDense(t *testing.T) {
	cases := []struct {
		seqs       []int64
		dups, gaps int
	}{
		{nil, 0, 0},
		{[]int64{0}, 0, 0},
		{[]int64{2, 0, 1}, 0, 0},
		{[]int64{0, 0}, 1, 1},          // the seed-000 outcome: two appends read count 0
		{[]int64{0, 1, 1, 3}, 1, 1},    // a duplicate pushes a later append past a gap
		{[]int64{0, 2}, 0, 1},          // a lost sequence
		{[]int64{1, 2, 3}, 0, 1},       // not 0-based
		{[]int64{0, 0, 0, 0}, 3, 3},    // every append read the same count
		{[]int64{0, 1, 2, -1}, 0, 1},   // out of range counts as a gap
		{[]int64{5, 5, 0, 1, 2}, 1, 2}, // 3 and 4 missing
	}
	for _, c := range cases {
		dups, gaps := checkDense(c.seqs)
		if dups != c.dups || gaps != c.gaps {
			t.Errorf("checkDense(%v) = %d dups, %d gaps; want %d, %d", c.seqs, dups, gaps, c.dups, c.gaps)
		}
	}
}

func TestCheckExactlyOnce(t *testing.T) {
	cases := []struct {
		accepted, stored  []string
		lost, dups, alien int
	}{
		{[]string{"a", "b"}, []string{"b", "a"}, 0, 0, 0},
		{[]string{"a", "b"}, []string{"a"}, 1, 0, 0},
		{[]string{"a", "b"}, []string{"a", "a", "b"}, 0, 1, 0},
		{[]string{"a"}, []string{"a", "z"}, 0, 0, 1},
		{[]string{"a", "b", "c"}, nil, 3, 0, 0},
	}
	for _, c := range cases {
		lost, dups, alien := checkExactlyOnce(c.accepted, c.stored)
		if lost != c.lost || dups != c.dups || alien != c.alien {
			t.Errorf("checkExactlyOnce(%v, %v) = %d/%d/%d; want %d/%d/%d",
				c.accepted, c.stored, lost, dups, alien, c.lost, c.dups, c.alien)
		}
	}
}
