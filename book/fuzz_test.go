package book

import (
	"errors"
	"testing"

	"github.com/tickcast/tickcast/feed"
)

// FuzzApply: Books.Apply takes any bytes without panicking; a level delta
// it refuses is named by a *feed.DecodeError or an *Error; whatever it
// applies leaves every side sorted best first with distinct prices.
func FuzzApply(f *testing.F) {
	f.Add(encode(f, 7, feed.FlagBookIncomplete, feed.SideSell, feed.ActionChange, 2735100, 700, 3))
	f.Add(encode(f, 1<<24, 0, feed.SideBuy, feed.ActionNew, -5, 1, 1))
	f.Add(encode(f, 7, 0, feed.SideBuy, feed.ActionDelete, 10, 0, 0)[:feed.HeaderLen+3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var bs Books
		// Apply the input, then the same input as a new level and as a
		// delete (when it is long enough to have an action byte).
		inputs := [][]byte{in}
		if len(in) > feed.HeaderLen+1 {
			for _, a := range []byte{feed.ActionNew, feed.ActionDelete} {
				c := append([]byte(nil), in...)
				c[feed.HeaderLen+1] = a
				inputs = append(inputs, c)
			}
		}
		for _, msg := range inputs {
			err := bs.Apply(msg)
			var de *feed.DecodeError
			var be *Error
			if err != nil && !errors.As(err, &de) && !errors.As(err, &be) {
				t.Fatalf("Apply(%x): %v is neither a *feed.DecodeError nor an *Error", msg, err)
			}
		}
		bs.Each(func(id uint32, b *Book) {
			for _, s := range []feed.Side{feed.SideBuy, feed.SideSell} {
				lv := b.Depth(s, b.Len(s))
				for i := 1; i < len(lv); i++ {
					if (s == feed.SideBuy) != (lv[i-1].Px > lv[i].Px) {
						t.Fatalf("instrument %d side %c not sorted best first: %+v", id, s, lv)
					}
				}
			}
		})
	})
}
