package itch

import (
	"math/rand/v2"
	"testing"
)

// TestLevelArena: sides taken from a small arena, grown at random and
// filled with their own marks, never share memory: every side still holds
// its marks after all the others were written; blocks handed back are
// handed out again before the arena's rest, and once it is used up blocks
// are allocated and counted.
func TestLevelArena(t *testing.T) {
	a := newLevelArena(2048)
	r := rand.New(rand.NewPCG(1, 2))
	sides := make([][]Level, 40)
	fill := func(i int) {
		s := sides[i][:cap(sides[i])]
		for j := range s {
			s[j] = Level{Price: uint32(i), Orders: uint32(j)}
		}
		sides[i] = s[:len(sides[i])]
	}
	for i := range sides {
		sides[i] = a.get(initialLevels)
		fill(i)
	}
	for range 200 {
		i := r.IntN(len(sides))
		sides[i] = sides[i][:cap(sides[i])]
		a.grow(&sides[i])
		fill(i)
		for k, s := range sides {
			s = s[:cap(s)]
			for j, l := range s {
				if l.Price != uint32(k) || l.Orders != uint32(j) {
					t.Fatalf("side %d level %d holds %+v: another side wrote over it", k, j, l)
				}
			}
		}
	}
	if a.allocated == 0 || a.used > len(a.mem) {
		t.Errorf("arena of %d levels: %d used, %d allocated after 200 doublings: want it used up and blocks allocated", len(a.mem), a.used, a.allocated)
	}

	// A block handed back is the next of its size handed out.
	b := newLevelArena(1024)
	first := b.get(64)
	b.put(first)
	if again := b.get(64); &again[:1][0] != &first[:1][0] || b.used != 64 {
		t.Errorf("a returned block of 64 was not reused (arena used %d)", b.used)
	}
}
