package meter

import (
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// countCl100k counts text's tokens in cl100k_base: it cuts text into pieces as the encoding's
// split rules do, and counts each piece once, remembering the counts of short pieces (most
// are words that recur). It is the library's count, made about ten times faster on prose by
// skipping its backtracking regular expression and its per-piece work for known pieces.
func countCl100k(text string) int {
	n := 0
	for i := 0; i < len(text); {
		j := nextPiece(text, i)
		n += pieces.count(text[i:j])
		i = j
	}
	return n
}

// nextPiece returns where the piece of s that starts at i ends, by cl100k_base's split rules:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// tried in that order at i, as the regular expression's engine does.
func nextPiece(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == '\'' {
		if k := contraction(s[i+1:]); k > 0 {
			return i + 1 + k
		}
	}
	if unicode.IsLetter(r) {
		return letters(s, i+n)
	}
	if r != '\r' && r != '\n' && !unicode.IsNumber(r) {
		if r2, n2 := utf8.DecodeRuneInString(s[i+n:]); n2 > 0 && unicode.IsLetter(r2) {
			return letters(s, i+n+n2)
		}
	}
	if unicode.IsNumber(r) {
		j := i + n
		for range 2 {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if n2 == 0 || !unicode.IsNumber(r2) {
				break
			}
			j += n2
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if r == ' ' {
		j++
	}
	k := j
	for k < len(s) {
		r2, n2 := utf8.DecodeRuneInString(s[k:])
		if unicode.IsSpace(r2) || unicode.IsLetter(r2) || unicode.IsNumber(r2) {
			break
		}
		k += n2
	}
	if k > j {
		for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k
	}
	// White space, from i to e.
	e, lastNewline, last, runes := i, -1, i, 0
	for e < len(s) {
		r2, n2 := utf8.DecodeRuneInString(s[e:])
		if !unicode.IsSpace(r2) {
			break
		}
		if r2 == '\r' || r2 == '\n' {
			lastNewline = e
		}
		last, runes = e, runes+1
		e += n2
	}
	switch {
	case runes == 0:
		return i + n // not reached: every character fits one of the rules
	case lastNewline >= 0: // `\s*[\r\n]+`: up to the run's last newline
		return lastNewline + 1
	case e == len(s): // `\s+(?!\S)` at the end of the text
		return e
	case runes > 1: // `\s+(?!\S)`: all but the last, which goes with what follows
		return last
	}
	return e // `\s+`
}

// letters returns where the run of letters from i ends.
func letters(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of the contraction s starts with ('s, 't, 're, 've, 'm, 'll,
// 'd, in any case, without the apostrophe), or 0.
func contraction(s string) int {
	lower := func(i int) byte {
		if i >= len(s) {
			return 0
		}
		return s[i] | 0x20
	}
	switch lower(0) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if lower(1) == 'e' {
			return 2
		}
	case 'l':
		if lower(1) == 'l' {
			return 2
		}
	}
	if len(s) >= 2 && s[0] == 0xc5 && s[1] == 0xbf { // ſ, the long s, is an s without case
		return 2
	}
	return 0
}

// pieceCache remembers the token counts of pieces. It forgets them all when it holds too
// many, which bounds its memory (about 16 MB) whatever the answers hold.
type pieceCache struct {
	m sync.Map // piece → count
	n atomic.Int64
}

var pieces pieceCache

const (
	maxPiece  = 64      // bytes: the most handed to the library at once (maxCachedPiece too)
	maxCached = 1 << 17 // pieces
)

// count counts a piece's tokens. A piece longer than maxPiece (a run of white space, a long
// word, base64) is counted in parts of at most maxPiece bytes, cut between characters, at most
// a token more a part: the library's work grows with the square of a piece's length (a
// megabyte of " \n" would take minutes).
func (c *pieceCache) count(p string) int {
	n := 0
	for len(p) > maxPiece {
		cut := maxPiece
		for cut > maxPiece-utf8.UTFMax && !utf8.RuneStart(p[cut]) {
			cut-- // between characters, unless these are not UTF-8
		}
		n += c.count1(p[:cut])
		p = p[cut:]
	}
	return n + c.count1(p)
}

func (c *pieceCache) count1(p string) int {
	if v, ok := c.m.Load(p); ok {
		return v.(int)
	}
	n, _ := cl100k().Count(p)
	if len(p) <= maxPiece {
		if c.n.Add(1) > maxCached {
			c.m.Clear()
			c.n.Store(0)
		}
		c.m.Store(string([]byte(p)), n) // a copy: p's answer is not kept
	}
	return n
}
