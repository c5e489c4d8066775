package bench

import "testing"

// The probe's parts are the browser client's: choosePartSize's 8 MiB, or
// whole MiB enough to stay within 10,000 parts.
func TestWebPartSize(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size, want int64
	}{
		{1, 8 * mib},
		{1 << 30, 8 * mib},
		{10_000 * 8 * mib, 8 * mib},
		{10_000*8*mib + 1, 9 * mib},
		{100 << 30, 11 * mib},
	} {
		if got := WebPartSize(c.size); got != c.want {
			t.Errorf("WebPartSize(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}
