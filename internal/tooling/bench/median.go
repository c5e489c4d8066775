package bench

import (
	"cmp"
	"slices"
)

// Median is the middle of xs in order (xs itself is left as it is): of an
// even number, the upper of the two middles, one of the values measured
// rather than their mean. Of none, the zero value.
func Median[T cmp.Ordered](xs []T) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
