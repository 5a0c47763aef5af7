package fault

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// isolate-one with a chosen member: it against the rest, both ways.
	l, err := Shape("isolate-one", 3, rng, 1)
	if err != nil || !slices.Equal(l.Groups[0], []int{1}) || !slices.Equal(l.Groups[1], []int{0, 2}) {
		t.Fatalf("isolate-one: %+v %v", l, err)
	}
	if !l.Cut(1, 0) || !l.Cut(0, 1) || l.Cut(0, 2) {
		t.Errorf("isolate-one cuts %+v", l)
	}
	l.OneWay = true
	if !l.Cut(1, 0) || l.Cut(0, 1) {
		t.Errorf("one-way: only what the first group sends is cut")
	}
	// halves of 5: 2 against 3, every member in one group.
	l, _ = Shape("halves", 5, rng, -1)
	if len(l.Groups) != 2 || len(l.Groups[0]) != 2 || len(l.Groups[1]) != 3 {
		t.Errorf("halves: %+v", l)
	}
	// majority of 5: 3 together, the 2 others alone.
	l, _ = Shape("majority", 5, rng, -1)
	if len(l.Groups) != 3 || len(l.Groups[0]) != 3 {
		t.Errorf("majority: %+v", l)
	}
	if a, b := l.Groups[1][0], l.Groups[2][0]; !l.Cut(a, b) || !l.Cut(b, a) {
		t.Errorf("majority: the minority members reach each other")
	}
	// ring of 5: each reaches its 2 neighbours, so sees 3 of 5 (a
	// majority), and is cut from 2.
	l, _ = Shape("ring", 5, rng, -1)
	for i := 0; i < 5; i++ {
		cut := 0
		for j := 0; j < 5; j++ {
			if l.Cut(i, j) {
				cut++
				if !l.Cut(j, i) {
					t.Errorf("ring: a one-way cut %d %d", i, j)
				}
			}
		}
		if cut != 2 {
			t.Errorf("ring: member %d is cut from %d, want 2", i, cut)
		}
	}
	if _, err := Shape("ring", 3, rng, -1); err == nil {
		t.Error("a ring of 3")
	}
	if _, err := Shape("halves", 1, rng, -1); err == nil {
		t.Error("a partition of 1")
	}
	// The same seed makes the same split.
	a, _ := Shape("halves", 7, rand.New(rand.NewPCG(9, 9)), -1)
	b, _ := Shape("halves", 7, rand.New(rand.NewPCG(9, 9)), -1)
	if !slices.Equal(a.Groups[0], b.Groups[0]) {
		t.Error("halves is not from the seed")
	}
}
