package guard

import (
	"math/bits"
	"slices"
	"testing"
)

// numpyRNG is numpy.random.default_rng(seed) for the two calls the text's
// experiment makes, integers(low, high) over a range of less than 2^32 and
// random(), drawing the same numbers from the same seed: SeedSequence, then
// PCG64 (a 128-bit LCG with the XSL-RR output), as numpy 1.17 and later
// build it. With it the experiment draws the runs the text drew.
type numpyRNG struct {
	hi, lo       uint64 // state
	incHi, incLo uint64 // increment, odd
	// half is the upper 32 bits of the last 64-bit output, kept for the
	// next 32-bit draw (PCG64's has_uint32).
	half    uint32
	hasHalf bool
}

// PCG64's multiplier, 0x2360ed051fc65da44385df649fccf645.
const pcgMulHi, pcgMulLo = 0x2360ed051fc65da4, 0x4385df649fccf645

func newNumpyRNG(seed uint32) *numpyRNG {
	w := seedSequence(seed, 8)
	word := func(i int) uint64 { return uint64(w[2*i]) | uint64(w[2*i+1])<<32 } // little-endian uint64 view
	// pcg64_set_seed: state from the first two words, increment from the
	// last two, then pcg_setseq_128_srandom_r.
	r := &numpyRNG{}
	initHi, initLo := word(0), word(1)
	seqHi, seqLo := word(2), word(3)
	r.incHi, r.incLo = seqHi<<1|seqLo>>63, seqLo<<1|1
	r.step()
	var c uint64
	r.lo, c = bits.Add64(r.lo, initLo, 0)
	r.hi, _ = bits.Add64(r.hi, initHi, c)
	r.step()
	return r
}

// seedSequence is numpy's SeedSequence(seed).generate_state(n) for a seed
// below 2^32 and no spawn key.
func seedSequence(seed uint32, n int) []uint32 {
	const (
		initA, multA = 0x43b0d7e5, 0x931e8875
		initB, multB = 0x8b51f9dd, 0x58f38ded
		mixL, mixR   = 0xca01f9dd, 0x4973f715
	)
	hashConst := uint32(initA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= multA
		v *= hashConst
		return v ^ v>>16
	}
	mix := func(x, y uint32) uint32 {
		r := mixL*x - mixR*y
		return r ^ r>>16
	}
	var pool [4]uint32
	entropy := []uint32{seed}
	for i := range pool {
		var e uint32
		if i < len(entropy) {
			e = entropy[i]
		}
		pool[i] = hashmix(e)
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	out := make([]uint32, n)
	hashConst = initB
	for i := range out {
		v := pool[i%len(pool)] ^ hashConst
		hashConst *= multB
		v *= hashConst
		out[i] = v ^ v>>16
	}
	return out
}

// step advances the LCG: state = state*mul + inc, mod 2^128.
func (r *numpyRNG) step() {
	hi, lo := bits.Mul64(r.lo, pcgMulLo)
	hi += r.hi*pcgMulLo + r.lo*pcgMulHi
	var c uint64
	r.lo, c = bits.Add64(lo, r.incLo, 0)
	r.hi, _ = bits.Add64(hi, r.incHi, c)
}

func (r *numpyRNG) uint64() uint64 {
	r.step()
	return bits.RotateLeft64(r.hi^r.lo, -int(r.hi>>58))
}

func (r *numpyRNG) uint32() uint32 {
	if r.hasHalf {
		r.hasHalf = false
		return r.half
	}
	v := r.uint64()
	r.half, r.hasHalf = uint32(v>>32), true
	return uint32(v)
}

// Float64 is Generator.random().
func (r *numpyRNG) Float64() float64 {
	return float64(r.uint64()>>11) * (1.0 / (1 << 53))
}

// Integers is Generator.integers(low, high): Lemire's method on 32-bit
// draws.
func (r *numpyRNG) Integers(low, high int) int {
	n := uint32(high - low)
	m := uint64(r.uint32()) * uint64(n)
	if uint32(m) < n {
		threshold := -n % n
		for uint32(m) < threshold {
			m = uint64(r.uint32()) * uint64(n)
		}
	}
	return low + int(m>>32)
}

// The first numbers numpy draws from default_rng(0), as numpy 1.24 prints
// them.
func TestNumpyRNGDrawsNumpysNumbers(t *testing.T) {
	t.Parallel()
	// SeedSequence(0).generate_state(4, np.uint64), as 32-bit words.
	words := []uint32{0xb0f478be, 0xdb2cd7e7, 0x2c71ba49, 0xabf4641a, 0x9d7b8d41, 0x20c6ed6d, 0x223c39d4, 0x2c4099de}
	if got := seedSequence(0, 8); !slices.Equal(got, words) {
		t.Fatalf("SeedSequence(0) state %x, want %x", got, words)
	}
	// PCG64 seeded from it, as rng.bit_generator.state shows it
	// (35399562948360463058890781895381311971).
	r := newNumpyRNG(0)
	const stateHi, stateLo = 0x1aa1b5345996452d, 0x09585eb7a69561e3
	if r.hi != stateHi || r.lo != stateLo {
		t.Errorf("state %016x%016x, want %016x%016x", r.hi, r.lo, uint64(stateHi), uint64(stateLo))
	}
	var ints []int
	for range 8 {
		ints = append(ints, r.Integers(2, 6))
	}
	if want := []int{5, 4, 4, 3, 3, 2, 2, 2}; !slices.Equal(ints, want) {
		t.Errorf("integers(2, 6) x8 = %v, want %v", ints, want)
	}
	r = newNumpyRNG(0)
	for i, want := range []float64{0.6369616873214543, 0.2697867137638703, 0.04097352393619469} {
		if got := r.Float64(); got != want {
			t.Errorf("random() #%d = %v, want %v", i+1, got, want)
		}
	}
	// A 32-bit draw keeps the upper half of its 64 bits for the next one;
	// random() takes a fresh 64.
	r = newNumpyRNG(0)
	got := []float64{float64(r.Integers(2, 6)), r.Float64(), float64(r.Integers(2, 6)), r.Float64()}
	if want := []float64{5, 0.2697867137638703, 4, 0.04097352393619469}; !slices.Equal(got, want) {
		t.Errorf("integers, random, integers, random = %v, want %v", got, want)
	}
}
