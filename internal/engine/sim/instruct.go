package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A simulated model follows a few simple instructions as any language model does, so that it
// passes the checks that tell a language model from a text generator without knowing what it
// should say (the coordinator's reference-free checks; buyers may ask the same): repeat a code
// exactly, do a small sum, write words in capitals one per line. The answer is right whatever
// the salt; its wording is drawn from the conversation like any answer, so two engines with
// different salts (two models) word it differently.

// instructed returns the answer to a user's message that asks one of the instructions the
// simulated model follows, drawing its wording from r; ok is false, and r untouched, for any
// other message.
func instructed(msg string, r *rng) (string, bool) {
	if len(msg) > 300 || strings.Contains(msg, "\n") {
		return "", false
	}
	lower := strings.ToLower(msg)
	rest := ""
	if colon := strings.LastIndex(msg, ":"); colon >= 0 {
		rest = strings.TrimSpace(msg[colon+1:])
	}
	if strings.Contains(lower, "exactly") && rest != "" && len(rest) <= 64 && strings.IndexFunc(rest, unicode.IsSpace) < 0 {
		forms := [...]string{"%s", "`%s`", "Here it is: %s", "Sure: %s"}
		return fmt.Sprintf(forms[r.intn(len(forms))], rest), true
	}
	if rest != "" && (strings.Contains(lower, "capital letters") || strings.Contains(lower, "uppercase")) &&
		(strings.Contains(lower, "one per line") || strings.Contains(lower, "own line")) {
		var words []string
		for w := range strings.SplitSeq(rest, ",") {
			w = strings.TrimSpace(w)
			if w == "" || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
				return "", false
			}
			words = append(words, strings.ToUpper(w))
		}
		if len(words) == 0 || len(words) > 20 {
			return "", false
		}
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
	if m := sumRE.FindStringSubmatch(msg); m != nil && (strings.Contains(lower, "number") || strings.Contains(lower, "result")) {
		a, errA := strconv.Atoi(m[1])
		b, errB := strconv.Atoi(m[3])
		if errA == nil && errB == nil {
			var n int
			switch strings.ToLower(m[2]) {
			case "+", "plus":
				n = a + b
			case "-", "−", "minus":
				n = a - b
			default:
				n = a * b
			}
			forms := [...]string{"%[4]d", "%[4]d.", "The answer is %[4]d.", "%[1]d %[2]s %[3]d = %[4]d."}
			return fmt.Sprintf(forms[r.intn(len(forms))], a, m[2], b, n), true
		}
	}
	return "", false
}

// sumRE finds a sum, difference or product of two whole numbers.
var sumRE = regexp.MustCompile(`(\d{1,6})\s*(\+|-|−|plus|minus|times|×|\*)\s*(\d{1,6})`)

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
