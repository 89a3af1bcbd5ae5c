package tftp

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Single-port mode answers from the well-known port, so anyone who can
// forge a client's address can also forge its ACKs: the transfer socket's
// port is no secret. A plain RFC 7440 sender then sends a whole window
// (64 blocks) for each blind ACK, to a victim who never asked: thousands
// of times the attacker's bytes (tftp/DESIGN.md#a-hostile-lab-network-issue-9).
//
// A TFTP ACK carries nothing but a block number, so the only thing a blind
// sender cannot know is what the server chose to send. The proof uses
// that: until a windowed transfer has proved its client reads, it sends
// rounds of c blocks followed by the block after next (a gap), with c
// drawn at random. An RFC 7440 client that sees the gap acknowledges its
// last block in order at once (as U-Boot and atftp do; one that waits for
// its timeout does the same, later): exactly block base+c-1. An ACK of it
// doubles the next round (c from [2^k, 2^(k+1)-1] at round k, clipped to
// the window less two); a lower ACK (loss, or a wrong guess) starts over at
// one block; an ACK of a block never sent in order can only be forged and
// ends the transfer. After rounds worth proofBits bits of guessing (five
// rounds, ~60 blocks, at a window of 64) the transfer runs full windows.
//
// So a blind ACK releases one round (two to four blocks on average, for an
// attacker who guesses each round's low end) instead of a window, and the
// bytes one client address is sent unproved are bounded per minute by a
// budget. Lock-step transfers (windowsize 1 to 3) are not gated: each ACK
// there releases at most three blocks anyway.

// proofBits is how much guessing the rounds must add up to: a blind sender
// passes with a chance of 2^-proofBits per attempt.
const proofBits = 10

// minProofWindow is the smallest window gated: below it c has one value.
const minProofWindow = 4

var (
	// errUnproven: an ACK of a block that was never sent in order.
	errUnproven = errors.New("single-port: the client acknowledged a block it was never sent (a forged ACK)")
	// errBudget: the client address has spent its budget unproved.
	errBudget = errors.New("single-port: the client address spent its budget before proving it reads")
)

// proof is the state of one windowed transfer's proof that its client reads.
type proof struct {
	window int64
	spend  func(n int64) bool // charges the client address; false: over budget

	level   int     // rounds acknowledged exactly in a row
	bits    float64 // guessing those rounds added up to
	proven  bool
	c       int64 // blocks in the current round
	choices int64 // values c was drawn from
}

func newProof(window int, spend func(n int64) bool) *proof {
	if window < minProofWindow {
		return nil
	}
	return &proof{window: int64(window), spend: spend}
}

// pick draws the next round's size.
func (p *proof) pick() {
	hi := min(int64(2)<<min(p.level, 20)-1, p.window-2)
	lo := max(1, hi-int64(1)<<min(p.level, 20)+1)
	p.choices = hi - lo + 1
	p.c = lo + rand.Int64N(p.choices)
}

// hit records an exact ACK of the round.
func (p *proof) hit() {
	p.bits += math.Log2(float64(p.choices))
	p.level++
	p.proven = p.bits >= proofBits
}

// miss records a lower ACK: the client lost a block, or guessed.
func (p *proof) miss() { p.level, p.bits = 0, 0 }

// judge takes the ACK of block acked after a round that sent end in
// order, with every block up to sentMax sent before: an ACK above both was
// never sent in order and can only be forged (errUnproven); one of end is
// a hit, any other a miss.
func (p *proof) judge(acked, end, sentMax int64) error {
	switch {
	case acked > end && acked > sentMax:
		return fmt.Errorf("%w: block %d", errUnproven, uint16(acked))
	case acked == end:
		p.hit()
	default:
		p.miss()
	}
	return nil
}

// budget bounds the bytes each client address is sent unproved per period.
type budget struct {
	limit int64
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	spent map[netip.Addr]*spending
}

type spending struct {
	n     int64
	since time.Time
}

// maxBudgetClients bounds the addresses remembered; when full of addresses
// still within their period, new ones get no unproved bytes (a flood of
// forged addresses cannot grow the map).
const maxBudgetClients = 16384

func newBudget(limit int64, every time.Duration) *budget {
	return &budget{limit: limit, every: every, now: time.Now, spent: map[netip.Addr]*spending{}}
}

// spend charges n bytes to a and reports whether they fit its budget.
func (b *budget) spend(a netip.Addr, n int64) bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spent[a]
	if s == nil || now.Sub(s.since) > b.every {
		if s == nil && len(b.spent) >= maxBudgetClients {
			for k, v := range b.spent {
				if now.Sub(v.since) > b.every {
					delete(b.spent, k)
				}
			}
			if len(b.spent) >= maxBudgetClients {
				return false
			}
		}
		s = &spending{since: now}
		b.spent[a] = s
	}
	if s.n+n > b.limit {
		return false
	}
	s.n += n
	return true
}
