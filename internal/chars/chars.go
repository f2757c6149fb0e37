// Package chars implements the character checks of requirement TOP-1: topics,
// ids, types and matchers must be valid UTF-8 free of control (C0, DEL, C1)
// and format (general category Cf) characters, classified with Unicode 17.0.
package chars

import "unicode/utf8"

// cfRange is an inclusive range of code points.
type cfRange struct{ lo, hi rune }

// cf17 lists every code point of general category Cf (Format) in Unicode
// 17.0.0, sorted and non-overlapping: 170 code points in 21 ranges.
//
// Source: the Unicode Character Database file extracted/DerivedGeneralCategory.txt,
// version 17.0.0, dated 2025-07-24
// (https://www.unicode.org/Public/17.0.0/ucd/extracted/DerivedGeneralCategory.txt,
// 277,514 bytes, SHA-256 d62e5bab70ca74f099343f71224fa051cb1fdd61a1ab45c0488c44cfc0b6102e).
//
// Unicode 15.1, 16.0 and 17.0 added no Cf code point and moved no existing code
// point into or out of Cf, so this set is identical to unicode.Cf of Go 1.26
// (Unicode 15.0.0); TestCfMatchesStdlib checks that. The table is kept
// explicit so that the classification stays pinned to Unicode 17.0 whatever
// Unicode version a future Go toolchain ships, and so that the lookup is a
// short binary search rather than a generic unicode.RangeTable walk.
var cf17 = [...]cfRange{
	{0x00AD, 0x00AD},   // SOFT HYPHEN
	{0x0600, 0x0605},   // ARABIC NUMBER SIGN..ARABIC NUMBER MARK ABOVE
	{0x061C, 0x061C},   // ARABIC LETTER MARK
	{0x06DD, 0x06DD},   // ARABIC END OF AYAH
	{0x070F, 0x070F},   // SYRIAC ABBREVIATION MARK
	{0x0890, 0x0891},   // ARABIC POUND MARK ABOVE..ARABIC PIASTRE MARK ABOVE
	{0x08E2, 0x08E2},   // ARABIC DISPUTED END OF AYAH
	{0x180E, 0x180E},   // MONGOLIAN VOWEL SEPARATOR
	{0x200B, 0x200F},   // ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
	{0x202A, 0x202E},   // LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
	{0x2060, 0x2064},   // WORD JOINER..INVISIBLE PLUS
	{0x2066, 0x206F},   // LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES
	{0xFEFF, 0xFEFF},   // ZERO WIDTH NO-BREAK SPACE
	{0xFFF9, 0xFFFB},   // INTERLINEAR ANNOTATION ANCHOR..INTERLINEAR ANNOTATION TERMINATOR
	{0x110BD, 0x110BD}, // KAITHI NUMBER SIGN
	{0x110CD, 0x110CD}, // KAITHI NUMBER SIGN ABOVE
	{0x13430, 0x1343F}, // EGYPTIAN HIEROGLYPH VERTICAL JOINER..EGYPTIAN HIEROGLYPH END WALLED ENCLOSURE
	{0x1BCA0, 0x1BCA3}, // SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP
	{0x1D173, 0x1D17A}, // MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE
	{0xE0001, 0xE0001}, // LANGUAGE TAG
	{0xE0020, 0xE007F}, // TAG SPACE..CANCEL TAG
}

// isCf reports whether r has general category Cf in Unicode 17.0.
func isCf(r rune) bool {
	switch {
	case r < 0x0600:
		return r == 0x00AD // the only Cf code point below U+0600
	case r > 0x206F && r < 0xFEFF:
		return false // most of the BMP (CJK, Hangul, symbols) has no Cf
	}
	// Binary search for the first range whose hi is >= r.
	lo, hi := 1, len(cf17)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cf17[m].hi < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(cf17) && cf17[lo].lo <= r
}

// bannedNonASCII reports whether the non-ASCII code point r (r >= 0x80) is a
// C1 control or a Cf character.
func bannedNonASCII(r rune) bool {
	return r <= 0x9F || isCf(r)
}

// SWAR constants: one in every byte, and the high bit of every byte.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// Valid reports whether s is valid UTF-8 free of C0, DEL, C1 and Cf (Unicode
// 17.0) code points (TOP-1). It does not allocate.
func Valid(s string) bool {
	i := 0
	for i < len(s) {
		if s[i] < utf8.RuneSelf {
			// ASCII run. Check eight bytes at a time while they are all in
			// 0x20..0x7E: a byte b is below 0x20 iff b-0x20 borrows into its
			// high bit while b has no high bit (exact as a whole-word test,
			// since a borrow only starts at such a byte), and b is 0x7F or
			// above iff b+1 or b has its high bit set.
			for i+8 <= len(s) {
				w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
					uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
				if ((w-0x20*ones)&^w|(w+ones)|w)&highs != 0 {
					break
				}
				i += 8
			}
			// Then byte by byte up to the end or the next non-ASCII byte.
			for i < len(s) {
				c := s[i]
				if c >= utf8.RuneSelf {
					break
				}
				if c < 0x20 || c == 0x7F {
					return false
				}
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 { // invalid UTF-8 (a genuine U+FFFD has size 3)
			return false
		}
		if bannedNonASCII(r) {
			return false
		}
		i += size
	}
	return true
}
