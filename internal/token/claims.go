package token

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwt"
)

// maxNumericDate is 9999-12-31T23:59:59Z. Later instants have no RFC 3339
// form, and as an expiry they can only be a mistake; jwx would take up to
// the year 292277026596. It is an int64, as Unix times are: untyped, it
// would become an int where nothing gives it a type (an argument of
// fmt.Errorf), and overflow where an int has 32 bits.
const maxNumericDate int64 = 253402300799

// checkClaims enforces what jwx leaves open in the claims set it decoded
// (payload is the JWS payload): that exp, nbf and iat are JSON numbers
// (RFC 7519 section 2), within [0, maxNumericDate], where jwx also takes
// strings, digits or RFC 3339, unless the process-wide jwt.Settings says
// otherwise; and that no claim name occurs twice, where jwx keeps the last
// occurrence and other readers of the same token may keep the first.
// Names are compared as encoding/json decodes them, as jwx does, so that
// "iss" and "\u0069ss" are the same claim.
func checkClaims(payload []byte) error {
	s := scanner{b: payload}
	s.ws()
	if s.i == len(s.b) || s.b[s.i] != '{' {
		return errors.New("not a JSON object")
	}
	var seen names
	err := s.object(func(name, value []byte) error {
		if !seen.add(name) {
			return fmt.Errorf("duplicate claim %q", name)
		}
		switch string(name) {
		case jwt.ExpirationKey, jwt.NotBeforeKey, jwt.IssuedAtKey:
			return numericDate(name, value)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.end()
}

// numericDate checks that v, the text of a JSON value, is a number of
// seconds from 1970 to maxNumericDate. Fractions are allowed (RFC 7519
// says "non-integer values can be represented").
func numericDate(name, v []byte) error {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return fmt.Errorf("%s is not a JSON number", name)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > float64(maxNumericDate) {
		return fmt.Errorf("%s is not between 0 and %d", name, maxNumericDate)
	}
	return nil
}

// names detects repeated member names. Up to len(few) names it compares
// them one by one, without allocating: claims sets and details are that
// small. Beyond, a map keeps the check linear.
type names struct {
	few  [16][]byte
	n    int
	many map[string]struct{}
}

// add records name and reports whether it was not there yet. name must
// stay unchanged while ns is in use.
func (ns *names) add(name []byte) bool {
	if ns.many != nil {
		if _, ok := ns.many[string(name)]; ok {
			return false
		}
		ns.many[string(name)] = struct{}{}
		return true
	}
	for _, n := range ns.few[:ns.n] {
		if bytes.Equal(n, name) {
			return false
		}
	}
	if ns.n < len(ns.few) {
		ns.few[ns.n] = name
		ns.n++
		return true
	}
	ns.many = make(map[string]struct{}, 2*len(ns.few))
	for _, n := range ns.few {
		ns.many[string(n)] = struct{}{}
	}
	ns.many[string(name)] = struct{}{}
	return true
}

// maxNesting is the nesting limit of encoding/json, so that the scanner
// refuses no text jwx took.
const maxNesting = 10000

// scanner walks JSON text (RFC 8259) without building values, refusing
// what encoding/json refuses. It lets a check see member names and value
// texts where decoding into a map would silently merge duplicates.
type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) fail() error {
	if s.i >= len(s.b) {
		return errors.New("unexpected end of JSON")
	}
	return fmt.Errorf("invalid JSON at offset %d", s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end checks that only whitespace follows.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail()
	}
	return nil
}

// value scans one value, after optional whitespace, and returns its text.
func (s *scanner) value() ([]byte, error) {
	s.ws()
	if s.i == len(s.b) {
		return nil, s.fail()
	}
	start := s.i
	var err error
	switch s.b[s.i] {
	case '{':
		err = s.object(nil)
	case '[':
		err = s.array()
	case '"':
		_, _, err = s.str()
	case 't':
		err = s.literal("true")
	case 'f':
		err = s.literal("false")
	case 'n':
		err = s.literal("null")
	default:
		err = s.number()
	}
	if err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// open enters the object or array at s.i, whose closing byte is end; it
// reports whether the container is empty (and then already left).
func (s *scanner) open(end byte) (empty bool, err error) {
	if s.depth++; s.depth > maxNesting {
		return false, errors.New("JSON nested too deeply")
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		s.depth--
		return true, nil
	}
	return false, nil
}

// more reads what follows an element of the container that end closes:
// a comma (more is true) or end itself (the container is left).
func (s *scanner) more(end byte) (more bool, err error) {
	s.ws()
	switch {
	case s.i == len(s.b):
		return false, s.fail()
	case s.b[s.i] == ',':
		s.i++
		return true, nil
	case s.b[s.i] == end:
		s.i++
		s.depth--
		return false, nil
	}
	return false, s.fail()
}

// object scans the object at s.i. member, when not nil, is called with
// each member's name, decoded, and the text of its value; its error stops
// the scan.
func (s *scanner) object(member func(name, value []byte) error) error {
	empty, err := s.open('}')
	for more := !empty; more && err == nil; more, err = s.more('}') {
		s.ws()
		if s.i == len(s.b) || s.b[s.i] != '"' {
			return s.fail()
		}
		name, err := s.name()
		if err != nil {
			return err
		}
		s.ws()
		if s.i == len(s.b) || s.b[s.i] != ':' {
			return s.fail()
		}
		s.i++
		v, err := s.value()
		if err != nil {
			return err
		}
		if member != nil {
			if err := member(name, v); err != nil {
				return err
			}
		}
	}
	return err
}

func (s *scanner) array() error {
	empty, err := s.open(']')
	for more := !empty; more && err == nil; more, err = s.more(']') {
		if _, err := s.value(); err != nil {
			return err
		}
	}
	return err
}

// name scans a string and returns it decoded. Printable ASCII without
// escapes is its own decoding; anything else is left to encoding/json, so
// that escapes and invalid UTF-8 decode exactly as jwx sees them.
func (s *scanner) name() ([]byte, error) {
	start := s.i
	content, plain, err := s.str()
	if err != nil || plain {
		return content, err
	}
	var n string
	if err := json.Unmarshal(s.b[start:s.i], &n); err != nil {
		return nil, err
	}
	return []byte(n), nil
}

// str scans the string at s.i and returns the text between the quotes;
// plain reports that it holds only printable ASCII and no escape.
func (s *scanner) str() (content []byte, plain bool, err error) {
	s.i++
	start := s.i
	plain = true
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], plain, nil
		case c == '\\':
			plain = false
			s.i++
			if s.i == len(s.b) {
				return nil, false, s.fail()
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if s.i == len(s.b) || !isHex(s.b[s.i]) {
						return nil, false, s.fail()
					}
					s.i++
				}
			default:
				return nil, false, s.fail()
			}
		case c < 0x20:
			return nil, false, s.fail()
		default:
			if c >= utf8.RuneSelf {
				plain = false
			}
			s.i++
		}
	}
	return nil, false, s.fail()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.fail()
	}
	s.i += len(lit)
	return nil
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i == len(s.b):
		return s.fail()
	case s.b[s.i] == '0':
		s.i++
	case '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return s.fail()
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail()
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail()
		}
	}
	return nil
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}
