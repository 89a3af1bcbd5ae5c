//go:build !unix

package record

// dataFree cannot tell the free space here; Health then relies on failed
// writes alone.
func dataFree(string) (int64, bool) { return 0, false }
