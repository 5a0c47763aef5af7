package stats

import (
	"fmt"
	"math"
)

// Intervals and sample sizes for hit rates: how sure a campaign can be of
// a rate it measured, of the difference between two rates, and how many
// chances a second campaign needs before zero hits (or a lower rate) shows
// a fix.
//
// The interval of one rate is Wilson's score interval: unlike the normal
// approximation (p ± z·√(p(1−p)/n)) it stays inside [0, 1], is never empty
// at 0 or n hits (0 of 320 gives [0, 1.2%] at 95%, not [0, 0]), and covers
// the true rate about as often as it says even for rare events and small n,
// which is what flaky races are. The interval of a difference is
// Newcombe's hybrid score interval (his method 10), built from the two
// Wilson intervals, with the same virtues.

// Z is the two-sided standard normal quantile for a confidence level
// (0.95 gives 1.959964).
func Z(confidence float64) float64 {
	if confidence <= 0 || confidence >= 1 {
		return math.NaN()
	}
	return math.Sqrt2 * math.Erfinv(confidence)
}

// Wilson is Wilson's score interval of hits in n chances at the normal
// quantile z (Z(0.95) for 95%). With n = 0 it is [0, 1].
func Wilson(hits, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p := float64(hits) / float64(n)
	nf := float64(n)
	z2 := z * z
	den := 1 + z2/nf
	mid := (p + z2/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	lo, hi = math.Max(0, mid-half), math.Min(1, mid+half)
	// Exact at the ends: 0 hits has lower bound 0, n hits upper bound 1.
	if hits == 0 {
		lo = 0
	}
	if hits == n {
		hi = 1
	}
	return lo, hi
}

// Diff is the difference of two rates, a − b, with Newcombe's hybrid score
// interval at the normal quantile z.
func Diff(hitsA, nA, hitsB, nB int, z float64) (d, lo, hi float64) {
	if nA <= 0 || nB <= 0 {
		return math.NaN(), -1, 1
	}
	pa, pb := float64(hitsA)/float64(nA), float64(hitsB)/float64(nB)
	la, ua := Wilson(hitsA, nA, z)
	lb, ub := Wilson(hitsB, nB, z)
	d = pa - pb
	lo = d - math.Sqrt((pa-la)*(pa-la)+(ub-pb)*(ub-pb))
	hi = d + math.Sqrt((ua-pa)*(ua-pa)+(pb-lb)*(pb-lb))
	return d, math.Max(-1, lo), math.Min(1, hi)
}

// maxChances bounds the sample-size search: past it the answer is "more
// than this".
const maxChances = 10_000_000

// ChancesForZero is how many chances a second campaign needs, all without a
// hit, for Fisher's exact test (two-sided) against hitsA of nA to reach
// p ≤ alpha: the question before starting "320 more starts". It is exact
// for the first campaign's counts. ok is false when no number of chances
// would do (hitsA is 0, or alpha cannot be reached below maxChances).
func ChancesForZero(hitsA, nA int, alpha float64) (n int, ok bool) {
	if hitsA <= 0 || nA <= 0 || alpha <= 0 {
		return 0, false
	}
	reached := func(n int) bool { return FisherExact(hitsA, nA-hitsA, 0, n) <= alpha }
	return smallest(reached)
}

// ChancesForPower is how many chances a second campaign needs so that, if
// its true rate is rateB (below the first campaign's rate, hitsA of nA),
// Fisher's exact test reaches p ≤ alpha with probability at least power.
// The probability sums, over every number of hits k the second campaign
// could see, the binomial chance of k times whether that table is
// significant with the second rate the lower. rateB 0 is ChancesForZero.
func ChancesForPower(hitsA, nA int, rateB, alpha, power float64) (n int, ok bool) {
	if rateB <= 0 {
		return ChancesForZero(hitsA, nA, alpha)
	}
	if hitsA <= 0 || nA <= 0 || rateB >= float64(hitsA)/float64(nA) || alpha <= 0 || power <= 0 || power >= 1 {
		return 0, false
	}
	pa := float64(hitsA) / float64(nA)
	reached := func(n int) bool {
		if n > 200_000 {
			// Beyond this the sum is slow; the normal approximation to the
			// binomial is excellent here.
			return normalPower(pa, nA, rateB, n, alpha) >= power
		}
		return Power(hitsA, nA, rateB, n, alpha) >= power
	}
	return smallest(reached)
}

// Power is the probability that a second campaign of n chances at true
// rate rateB shows, by Fisher's exact test at alpha, a lower rate than
// hitsA of nA.
func Power(hitsA, nA int, rateB float64, n int, alpha float64) float64 {
	pa := float64(hitsA) / float64(nA)
	mean := rateB * float64(n)
	sd := math.Sqrt(mean * (1 - rateB))
	hiK := min(n, int(mean+12*sd+12))
	sum := 0.0
	for k := 0; k <= hiK; k++ {
		if float64(k)/float64(n) >= pa {
			break
		}
		if FisherExact(hitsA, nA-hitsA, k, n-k) > alpha {
			continue
		}
		sum += math.Exp(lbinom(n, k, rateB))
	}
	return math.Min(1, sum)
}

func lbinom(n, k int, p float64) float64 {
	if p <= 0 {
		if k == 0 {
			return 0
		}
		return math.Inf(-1)
	}
	return lchoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
}

// normalPower is the two-proportion z-test's power, for large n.
func normalPower(pa float64, nA int, pb float64, n int, alpha float64) float64 {
	za := Z(1 - alpha)
	se := math.Sqrt(pa*(1-pa)/float64(nA) + pb*(1-pb)/float64(n))
	if se == 0 {
		return 1
	}
	return 0.5 * math.Erfc(-((pa-pb)/se-za)/math.Sqrt2)
}

// smallest finds the smallest n ≥ 1 with reached(n), assuming reached is
// (nearly) monotone: doubling, then bisection, then a short walk down in
// case the discreteness of the exact test lets a slightly smaller n pass.
func smallest(reached func(int) bool) (int, bool) {
	hi := 1
	for !reached(hi) {
		if hi >= maxChances {
			return 0, false
		}
		hi = min(hi*2, maxChances)
	}
	lo := hi / 2 // reached(lo) is false, or lo is 0
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if reached(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	for k := 0; k < 8 && hi > 1 && reached(hi-1); k++ {
		hi--
	}
	return hi, true
}

// Rate formats hits of n as the seeds write it: "1 in 35", "0", "-".
func Rate(hits, n int) string {
	switch {
	case n <= 0:
		return "-"
	case hits == 0:
		return "0"
	}
	return fmt.Sprintf("1 in %.0f", float64(n)/float64(hits))
}

// Percent formats a share as a percentage with sensible digits.
func Percent(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case x == 0:
		return "0%"
	case math.Abs(x) < 0.0001:
		return fmt.Sprintf("%.3f%%", 100*x)
	case math.Abs(x) < 0.01:
		return fmt.Sprintf("%.2f%%", 100*x)
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// FormatP formats a p-value with two significant digits ("0.0029",
// "5.1e-05", "1").
func FormatP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "-"
	case p >= 0.9995:
		return "1"
	}
	return fmt.Sprintf("%.2g", p)
}
