package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A simulated model follows a few simple instructions as any language model does, so that it
// passes the checks that tell a language model from a text generator without knowing what it
// should say (the coordinator's reference-free checks; buyers may ask the same): repeat a code
// exactly, do a small sum, write words in capitals one per line. It reads the task out of the
// user's last message wherever it is and however it is worded, as a model would, not by its
// template:
//
//   - a code to repeat is a token of capitals and digits (at least one of each) in a message
//     that asks to repeat, copy or echo something, or to reply with it exactly;
//   - a sum is two whole numbers joined by an operator or its words ("37 + 58", "71 minus 29",
//     "7 × 8"), or named by its words ("the sum of 37 and 58", "subtract 29 from 71", "multiply
//     7 by 8"), in a message that asks for a number, a result or what something is;
//   - words to write are the items of a list (one word a line, after a bullet or a number;
//     words in double quotes; or words joined by commas and "and") in a message that asks for
//     capitals and for lines, in the order asked: as given, alphabetical, or reversed.
//
// The answer is right whatever the salt; its wording is drawn from the conversation like any
// answer, so two engines with different salts (two models) word it differently.

// maxInstruction bounds the message read for an instruction: a longer one gets the usual
// answer.
const maxInstruction = 4000

// instructed returns the answer to a user's message that asks one of the instructions the
// simulated model follows, drawing its wording from r; ok is false, and r untouched, for any
// other message.
func instructed(msg string, r *rng) (string, bool) {
	if len(msg) > maxInstruction {
		return "", false
	}
	lower := strings.ToLower(msg)
	if code, ok := codeToRepeat(msg, lower); ok {
		forms := [...]string{"%s", "`%s`", "Here it is: %s", "Sure: %s", "Sure, here it is:\n\n%s", "**%s**"}
		return fmt.Sprintf(forms[r.intn(len(forms))], code), true
	}
	if words, ok := wordsInCapitals(msg, lower); ok {
		var b strings.Builder
		form := r.intn(3)
		for i, w := range words {
			if i > 0 {
				b.WriteByte('\n')
			}
			switch form {
			case 1:
				b.WriteString("- ")
			case 2:
				fmt.Fprintf(&b, "%d. ", i+1)
			}
			b.WriteString(w)
		}
		return b.String(), true
	}
	if s, ok := sumAsked(lower); ok {
		forms := [...]string{"%[4]d", "%[4]d.", "The answer is %[4]d.", "%[1]d %[2]s %[3]d = %[4]d.", "**%[4]d**"}
		sign := map[string]string{"+": "+", "-": "-", "*": "×"}[s.op]
		return fmt.Sprintf(forms[r.intn(len(forms))], s.a, sign, s.b, s.result()), true
	}
	return "", false
}

// repeatCues are words that ask for something to be given back as it is.
var repeatCues = [...]string{
	"repeat", "copy", "echo", "exactly", "verbatim", "write back", "write it back", "type out", "type it out",
	"reply with", "respond with", "read back", "read it back", "say back", "send back", "send it back",
	"character for character", "as written", "as it appears", "paste", " back", "unchanged", "without changing",
}

// codeToRepeat finds a code the message asks to repeat: the first token of capitals and
// digits (and hyphens), with at least one of each, in a message with a word asking to repeat.
func codeToRepeat(msg, lower string) (string, bool) {
	if !containsAny(lower, repeatCues[:]) {
		return "", false
	}
	for f := range strings.FieldsSeq(msg) {
		tok := strings.TrimFunc(f, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) })
		if isCode(tok) {
			return tok, true
		}
	}
	return "", false
}

// isCode says whether tok reads as a code: 6 to 40 capitals, digits and single hyphens, with a
// capital and a digit.
func isCode(tok string) bool {
	if len(tok) < 6 || len(tok) > 40 || strings.Contains(tok, "--") {
		return false
	}
	var letter, digit bool
	for _, c := range tok {
		switch {
		case 'A' <= c && c <= 'Z':
			letter = true
		case '0' <= c && c <= '9':
			digit = true
		case c != '-':
			return false
		}
	}
	return letter && digit
}

// capitalCues ask for capitals; lineCues for a word on each line.
var (
	capitalCues = [...]string{"capital letter", "in capitals", "block capitals", "uppercase", "upper case", "upper-case", "all caps", "block letters"}
	lineCues    = [...]string{"per line", "own line", "separate line", "new line", "line each", "line by itself", "line of its own"}
)

// wordsInCapitals finds the words the message asks to write in capitals one per line, in
// capitals, in the order it asks.
func wordsInCapitals(msg, lower string) ([]string, bool) {
	if !containsAny(lower, capitalCues[:]) || !containsAny(lower, lineCues[:]) {
		return nil, false
	}
	words := listed(msg)
	if len(words) < 2 || len(words) > 20 {
		return nil, false
	}
	for i, w := range words {
		words[i] = strings.ToUpper(w)
	}
	switch {
	case containsAny(lower, []string{"alphabetical", "a to z", "a-z", "sorted"}):
		slices.Sort(words)
	case containsAny(lower, []string{"reverse", "last to first", "last one first", "starting with the last", "backwards"}):
		slices.Reverse(words)
	}
	return words, true
}

// listed returns the words a message lists: the lines that are one word after a bullet or a
// number, else the words in double quotes, else the longest run of words joined by commas and
// "and" (the last of the longest).
func listed(msg string) []string {
	var lines []string
	for l := range strings.SplitSeq(msg, "\n") {
		if m := bulletRE.FindStringSubmatch(l); m != nil {
			lines = append(lines, m[1])
		}
	}
	if len(lines) >= 2 {
		return lines
	}
	var quoted []string
	for _, m := range quotedRE.FindAllStringSubmatch(msg, -1) {
		quoted = append(quoted, m[1])
	}
	if len(quoted) >= 2 {
		return quoted
	}
	return longestRun(msg)
}

var (
	bulletRE = regexp.MustCompile(`^\s*(?:[-*•]|\d{1,2}[.)])\s*([\pL]+)\s*$`)
	quotedRE = regexp.MustCompile(`["“]([\pL]+)["”]`)
)

// longestRun returns the longest run of single words joined by commas and "and" (or "or") in
// s: "apple, river and candle".
func longestRun(s string) []string {
	type token struct {
		word  string // "" for a comma or another mark
		comma bool
	}
	var toks []token
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			toks = append(toks, token{word: b.String()})
			b.Reset()
		}
	}
	for _, c := range s {
		switch {
		case unicode.IsLetter(c) || c == '\'':
			b.WriteRune(c)
		case c == ',':
			flush()
			toks = append(toks, token{comma: true})
		case unicode.IsSpace(c):
			flush()
		default:
			flush()
			toks = append(toks, token{}) // ends a run
		}
	}
	flush()
	isJoin := func(w string) bool { return w == "and" || w == "or" }
	var best []string
	for i := 0; i < len(toks); i++ {
		if toks[i].word == "" || isJoin(strings.ToLower(toks[i].word)) {
			continue
		}
		run := []string{toks[i].word}
		j := i + 1
		for {
			k := j
			if k < len(toks) && toks[k].comma {
				k++
			}
			if k < len(toks) && isJoin(strings.ToLower(toks[k].word)) {
				k++
			}
			if k == j || k >= len(toks) || toks[k].word == "" || isJoin(strings.ToLower(toks[k].word)) {
				break
			}
			run = append(run, toks[k].word)
			j = k + 1
		}
		if len(run) >= 2 && len(run) >= len(best) {
			best = run
		}
	}
	return best
}

// sum is a sum, difference or product of two whole numbers; op is its sign.
type sum struct {
	a, b int
	op   string
}

func (s sum) result() int {
	switch s.op {
	case "+":
		return s.a + s.b
	case "-":
		return s.a - s.b
	}
	return s.a * s.b
}

// sumCue finds words that ask for a result ("product" or "sum" alone do not: a "product
// description", "summarize").
var sumCue = regexp.MustCompile(`\b(?:number|result|answer|what is|what's|how much|compute|calculate|work out|evaluate|solve|total)\b|=\s*\?`)

// sumPhrases are sums named by their words: each gives the sign, and whether its numbers come
// in the order b, a ("subtract 29 from 71").
var sumPhrases = []struct {
	re       *regexp.Regexp
	op       string
	reversed bool
}{
	{regexp.MustCompile(`\bsum of (\d{1,4}) and (\d{1,4})\b`), "+", false},
	{regexp.MustCompile(`\badd (\d{1,4}) and (\d{1,4})\b`), "+", false},
	{regexp.MustCompile(`\badd (\d{1,4}) to (\d{1,4})\b`), "+", true},
	{regexp.MustCompile(`\b(\d{1,4}) and (\d{1,4}) added together\b`), "+", false},
	{regexp.MustCompile(`\bsubtract (\d{1,4}) from (\d{1,4})\b`), "-", true},
	{regexp.MustCompile(`\btake (\d{1,4}) away from (\d{1,4})\b`), "-", true},
	{regexp.MustCompile(`\bdifference between (\d{1,4}) and (\d{1,4})\b`), "-", false},
	{regexp.MustCompile(`\bproduct of (\d{1,4}) and (\d{1,4})\b`), "*", false},
	{regexp.MustCompile(`\bmultiply (\d{1,4}) (?:by|and) (\d{1,4})\b`), "*", false},
}

// sumRE finds a sum, difference or product written with an operator or its word.
var sumRE = regexp.MustCompile(`(\d{1,4})\s*(\+|-|−|×|\*| x | plus | minus | times | multiplied by | take away )\s*(\d{1,4})`)

// sumAsked finds the sum a (lower-cased) message asks for.
func sumAsked(lower string) (sum, bool) {
	if !sumCue.MatchString(lower) {
		return sum{}, false
	}
	for _, p := range sumPhrases {
		if m := p.re.FindStringSubmatch(lower); m != nil {
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			if p.reversed {
				a, b = b, a
			}
			return sum{a: a, b: b, op: p.op}, true
		}
	}
	for _, m := range sumRE.FindAllStringSubmatchIndex(lower, -1) {
		// Not a part of a longer number, a date or a range: 2024-05-01, 12345-6789, 1.5 + 2.
		if before := m[0] - 1; before >= 0 && strings.ContainsRune("0123456789.-/:", rune(lower[before])) {
			continue
		}
		if after := m[1]; after < len(lower) && strings.ContainsRune("0123456789-/:", rune(lower[after])) ||
			after+1 < len(lower) && lower[after] == '.' && '0' <= lower[after+1] && lower[after+1] <= '9' {
			continue
		}
		a, _ := strconv.Atoi(lower[m[2]:m[3]])
		b, _ := strconv.Atoi(lower[m[6]:m[7]])
		op := "*"
		switch strings.TrimSpace(lower[m[4]:m[5]]) {
		case "+", "plus":
			op = "+"
		case "-", "−", "minus", "take away":
			op = "-"
		}
		return sum{a: a, b: b, op: op}, true
	}
	return sum{}, false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// plainText splits s into tokens as answers are: each one word with the white space before it.
func plainText(s string) text {
	var ends []int
	for i := 1; i < len(s); i++ {
		if isSpace(s[i]) && !isSpace(s[i-1]) {
			ends = append(ends, i)
		}
	}
	if s != "" {
		ends = append(ends, len(s))
	}
	return text{s: s, ends: ends}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }
