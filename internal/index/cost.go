package index

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// Cost is what a URL pattern may cost the hub, estimated from its source
// before anything is compiled: the engine compiles each component of a
// pattern into a regular expression, whose size bounds both the heap the
// compiled pattern keeps and the time each evaluation takes (an RE2-class
// engine runs in time linear in the input, times the program size), and
// whose capture groups multiply that time again (each evaluation extracts
// every group). A subscriber writes the pattern, so the hub caps both
// before it pays for either (MAT-9).
type Cost struct {
	// Groups counts the pattern's groups: each *, :name and (regexp).
	// It may overcount (a * or : that the engine reads as a literal
	// counts too), never undercount.
	Groups int
	// Size estimates the compiled program's size, in regular expression
	// instructions: literal text (percent-encoding may triple it), a few
	// per group, and custom regular expressions with their repetitions
	// expanded, twice when a modifier repeats them. A compiled pattern
	// keeps at most about 50 bytes of heap per unit, when its regular
	// expressions are its own; 2 to 5 when it shares them with patterns
	// that differ only in the literal text their components start and end
	// with, as per-user patterns do (see newURLMatcher). TestCostBounds
	// measures it.
	Size int
}

// Limit bounds what one pattern may cost.
type Limit struct{ Groups, Size int }

// ErrCost is wrapped by the error of a pattern refused for what it would
// cost (see [Limit.Check]).
var ErrCost = errors.New("URL pattern over the hub's limits")

// Check returns an error wrapping ErrCost when c, the cost of the pattern
// raw, exceeds l.
func (l Limit) Check(raw string, c Cost) error {
	switch {
	case c.Groups > l.Groups:
		return fmt.Errorf("%w: %q has %d groups, more than %d", ErrCost, raw, c.Groups, l.Groups)
	case c.Size > l.Size:
		return fmt.Errorf("%w: %q would compile to about %d instructions, more than %d", ErrCost, raw, c.Size, l.Size)
	}
	return nil
}

// Estimated program cost of the pieces of a pattern.
const (
	baseSize    = 32 // the pattern, its checks and its trie keys
	literalSize = 3  // per byte: percent-encoding expands a byte to three
	groupSize   = 8  // a group, its prefix and suffix and a modifier
	maxSize     = 1 << 30
)

// EstimateCost scans the pattern raw as the engine's tokenizer would and
// estimates its cost. It costs time linear in len(raw) and allocates only
// to parse custom regular expressions, whose repetitions it does not
// expand. It fails on a custom regular expression that the engine could
// not compile either.
func EstimateCost(raw string) (Cost, error) {
	c := Cost{Size: baseSize + literalSize*len(raw)}
	for i := 0; i < len(raw); {
		switch raw[i] {
		case '\\':
			i += 2 // an escaped character is literal text
			continue
		case '*':
			c.Groups++
			c.Size += groupSize
		case ':':
			r, _ := utf8.DecodeRuneInString(raw[i+1:])
			if nameStart(r) {
				c.Groups++
				c.Size += groupSize
			}
		case '(':
			end, ok := regexpEnd(raw, i+1)
			if !ok {
				return Cost{}, fmt.Errorf("%w: unterminated group", ErrPattern)
			}
			re, err := syntax.Parse(raw[i+1:end], syntax.Perl)
			if err != nil {
				return Cost{}, fmt.Errorf("%w: regular expression: %v", ErrPattern, err)
			}
			c.Groups++
			// Twice: a group repeated by a modifier appears twice in the
			// component's expression.
			c.Size = saturatingAdd(c.Size, saturatingAdd(groupSize, saturatingMul(2, progSize(re))))
			i = end + 1
			continue
		}
		i++
	}
	return c, nil
}

// regexpEnd returns the index of the parenthesis closing the regexp group
// whose content starts at start, following the engine's tokenizer:
// backslash escapes, nested groups that must all be non-capturing.
func regexpEnd(raw string, start int) (int, bool) {
	depth := 1
	for i := start; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i, i > start
			}
		}
	}
	return 0, false
}

// nameStart reports whether r may start a :name group; the engine accepts
// identifier starts.
func nameStart(r rune) bool {
	return r == '$' || r == '_' || unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start)
}

// progSize estimates the instructions of re compiled, repetitions
// expanded, the way Go's regexp compiler expands them.
func progSize(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return max(len(re.Rune), 1)
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return saturatingAdd(progSize(re.Sub[0]), 2)
	case syntax.OpConcat, syntax.OpAlternate:
		n := len(re.Sub)
		for _, sub := range re.Sub {
			n = saturatingAdd(n, progSize(sub))
		}
		return n
	case syntax.OpRepeat:
		copies := re.Max
		if copies < 0 {
			copies = re.Min + 1 // x{n,} is n copies and a star
		}
		return saturatingMul(max(copies, 1), saturatingAdd(progSize(re.Sub[0]), 1))
	}
	return 1
}

// saturatingAdd and saturatingMul return a+b and a*b, at most maxSize,
// for a and b that are not negative. They compare before they compute:
// the result may not fit an int, whose 32 bits on 386 and arm do not hold
// 2*maxSize.
func saturatingAdd(a, b int) int {
	if a > maxSize-b {
		return maxSize
	}
	return a + b
}

func saturatingMul(a, b int) int {
	if a != 0 && b > maxSize/a {
		return maxSize
	}
	return a * b
}
