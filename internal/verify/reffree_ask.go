package verify

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// How a reference-free test's request is written: like a buyer's, and never twice the same.
// Every part is an independent draw: whether a system prompt or an earlier exchange comes
// before; the buyer's context (an opening, a situation naming random people and places, a
// closing) and where the task stands in it; the task's verb, object, qualifier and the
// constraint on the answer; where its data goes and how it is written (a code's shape; a sum
// written with a sign, with words, or as a command; a list inline, quoted or bulleted); and
// the values. The parts hold no digits, codes or lists of their own, so the task's data is
// the only one in the message, and nothing in the message is the answer: a node that only
// echoes the prompt cannot pass the sum or the words.

// Levels of dress: the task alone; in a buyer's context; and after a system prompt or an
// earlier exchange of an ordinary chat.
const (
	bare = iota
	plain
	dressed
)

// composer writes one test's request.
type composer struct {
	r       *rand.Rand
	level   int
	framed  bool   // drawn the system prompt and the earlier exchange
	system  string // "" for none
	history []turn // an earlier exchange: a user's message and the assistant's answer
}

func (c *composer) pick(xs []string) string { return xs[c.r.IntN(len(xs))] }

// chance is true with probability 1/n.
func (c *composer) chance(n int) bool { return c.r.IntN(n) == 0 }

// frame draws what comes before the user's message, once.
func (c *composer) frame() {
	if c.framed {
		return
	}
	c.framed = true
	if c.level < dressed {
		return
	}
	if c.chance(3) {
		c.system = c.pick(systemPrompts[:])
	}
	if c.chance(4) {
		var exchanges [][]turn
		for _, p := range prompts {
			for i := 1; i < len(p); i++ {
				if p[i].role == "assistant" && p[i-1].role == "user" {
					exchanges = append(exchanges, p[:i+1])
					break
				}
			}
		}
		ex := exchanges[c.r.IntN(len(exchanges))]
		if ex[0].role == "system" {
			c.system, ex = ex[0].text, ex[1:]
		}
		c.history = ex
	}
}

// conversation is the request's messages, ending with the user's message msg.
func (c *composer) conversation(msg string) []turn {
	c.frame()
	var turns []turn
	if c.system != "" {
		turns = append(turns, system(c.system))
	}
	turns = append(turns, c.history...)
	return append(turns, user(msg))
}

// text is all the request's text, the user's message msg last.
func (c *composer) text(msg string) string {
	var b strings.Builder
	for _, t := range c.conversation(msg) {
		b.WriteString(t.text + "\n")
	}
	return b.String()
}

// dress sets a task among a buyer's context: sentences of situation (drawn from situations,
// with a random name and place), an opening and a closing, in a random order; after an
// earlier exchange, a word that moves on. tail is what must come after the task (a word list
// in lines), or "".
func (c *composer) dress(task string, situations []string, tail string) string {
	c.frame()
	if c.level == bare {
		return task + tail
	}
	var parts []string
	switch {
	case len(c.history) > 0:
		parts = append(parts, c.pick(movingOn[:]))
	case c.chance(3):
		parts = append(parts, c.pick(openings[:]))
	}
	situation := ""
	if !c.chance(4) {
		situation = strings.NewReplacer("{name}", c.pick(names[:]), "{place}", c.pick(places[:])).Replace(c.pick(situations))
	}
	switch {
	case situation == "":
		parts = append(parts, task)
	case tail == "" && c.chance(3): // the task first, then why
		parts = append(parts, task, situation)
	default:
		parts = append(parts, situation, task)
	}
	if tail == "" && c.chance(3) {
		parts = append(parts, c.pick(closings[:]))
	}
	sep := " "
	if c.chance(4) {
		sep = "\n\n"
	}
	return strings.Join(parts, sep) + tail
}

// polite puts a polite opening before an instruction (a verb in lower case), and its end
// after: "Could you repeat …?", "Please repeat ….".
func (c *composer) polite(instruction string) string {
	switch p := c.pick(politeness[:]); {
	case strings.HasSuffix(p, "you"):
		return p + " " + instruction + "?"
	case p == "":
		return upperFirst(instruction) + "."
	default:
		return p + " " + instruction + "."
	}
}

// echo writes a test that asks to repeat a random code.
func (c *composer) echo() Test {
	code := c.code()
	noun := c.pick(codeNouns[:])
	verb := c.pick(repeatVerbs[:])
	qual := c.pick(exactly[:])
	tail := c.pick(nothingElse[:])
	var task string
	switch c.r.IntN(4) {
	case 0: // Repeat this code exactly, and nothing else: K7QM-93XF
		task = strings.TrimSuffix(strings.TrimSuffix(c.polite(fmt.Sprintf(verb, c.pick(codeDets[:])+" "+noun)+" "+qual+tail), "."), "?") + ": " + code
	case 1: // Please copy the reference K7QM-93XF exactly as written.
		task = c.polite(fmt.Sprintf(verb, "the "+noun+" "+code) + " " + qual + tail)
	case 2: // My order number is K7QM-93XF. Could you repeat it exactly?
		task = fmt.Sprintf(c.pick(codeSentences[:]), noun, code) + " " + c.polite(fmt.Sprintf(verb, c.pick([]string{"it", "that", "that " + noun}))+" "+qual+tail)
	default: // K7QM-93XF — repeat the code above exactly.
		task = code + "\n\n" + c.polite(fmt.Sprintf(verb, "the "+noun+" above")+" "+qual+tail)
	}
	return Test{Kind: TestEcho, code: code, ask: "repeat " + code, prompt: c.dress(task, echoSituations[:], "")}
}

// codeAlphabet has no letters and digits that read alike (0 O, 1 I).
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// code draws a random code in one of the shapes codes come in, with a letter and a digit.
func (c *composer) code() string {
	groups := [...][]int{{4, 4}, {3, 3, 3}, {8}, {5, 4}, {2, 4, 3}, {3, 6}}[c.r.IntN(6)]
	for {
		var b strings.Builder
		for i, n := range groups {
			if i > 0 {
				b.WriteByte('-')
			}
			for range n {
				b.WriteByte(codeAlphabet[c.r.IntN(len(codeAlphabet))])
			}
		}
		s := b.String()
		if strings.ContainsAny(s, "23456789") && strings.ContainsAny(s, "ABCDEFGHJKLMNPQRSTUVWXYZ") {
			return s
		}
	}
}

// arithmetic writes a test that asks for a small sum, difference or product, whose result is
// no number the request holds.
func (c *composer) arithmetic() Test {
	c.frame()
	for {
		var a, b, result int
		var forms, commands []string
		switch c.r.IntN(3) {
		case 0:
			a, b = 11+c.r.IntN(89), 11+c.r.IntN(89)
			result, forms, commands = a+b, sumForms[:], addCommands[:]
		case 1:
			a = 50 + c.r.IntN(50)
			b = 11 + c.r.IntN(a-11)
			result, forms, commands = a-b, differenceForms[:], subtractCommands[:]
		default:
			a, b = 3+c.r.IntN(10), 3+c.r.IntN(10)
			result, forms, commands = a*b, productForms[:], multiplyCommands[:]
		}
		expr := fmt.Sprintf(c.pick(forms), a, b)
		var question string
		if c.chance(3) {
			expr = fmt.Sprintf(c.pick(commands), a, b)
			question = c.polite(expr)
		} else {
			question = upperFirst(fmt.Sprintf(c.pick(questions[:]), expr))
		}
		constraint := c.pick(justTheNumber[:])
		task := question + " " + constraint
		if c.chance(4) {
			task = strings.TrimSuffix(constraint, ".") + ": " + lowerFirst(question)
		}
		msg := c.dress(task, sumSituations[:], "")
		if !slices.Contains(numbersIn(c.text(msg)), result) {
			return Test{Kind: TestArithmetic, result: result, ask: strconv.Quote(expr), prompt: msg}
		}
	}
}

var numberRE = regexp.MustCompile(`\d+`)

// numbersIn returns the whole numbers written in s.
func numbersIn(s string) []int {
	var ns []int
	for _, m := range numberRE.FindAllString(s, -1) {
		if n, err := strconv.Atoi(m); err == nil {
			ns = append(ns, n)
		}
	}
	return ns
}

// formatWords are common words no model misspells in capitals.
var formatWords = [...]string{
	"apple", "river", "candle", "window", "garden", "pencil", "rabbit", "orange", "bridge", "mirror",
	"forest", "button", "rocket", "silver", "castle", "pepper", "ticket", "basket", "doctor", "planet",
	"guitar", "jacket", "camera", "violin", "island", "winter", "summer", "market", "tomato", "carpet",
	"hammer", "kitten", "lemon", "piano", "tiger", "cloud", "stone", "horse", "bread", "chair",
	"table", "glass", "paper", "music", "water", "green", "purple", "yellow", "spoon", "train",
	"honey", "ocean", "pillow", "blanket", "cookie", "dragon", "engine", "feather", "flower", "fossil",
	"harbor", "helmet", "kettle", "ladder", "magnet", "meadow", "monkey", "needle", "onion", "parrot",
	"pebble", "pirate", "puzzle", "saddle", "shadow", "spider", "statue", "sugar", "tunnel", "turtle",
	"valley", "wallet", "whistle", "wizard", "zebra", "anchor", "bottle", "cactus", "copper", "desert",
}

// format writes a test that asks for 3 or 4 random words in capitals, one per line, in the
// order given, alphabetical or reversed.
func (c *composer) format() Test {
	n := 3 + c.r.IntN(2)
	var words []string
	for _, i := range c.r.Perm(len(formatWords)) {
		if !slices.Contains(words, formatWords[i]) {
			words = append(words, formatWords[i])
		}
		if len(words) == n {
			break
		}
	}
	want := slices.Clone(words)
	order, orderPhrase := "", ""
	switch c.r.IntN(5) {
	case 0:
		for slices.IsSorted(words) {
			c.r.Shuffle(n, func(i, j int) { words[i], words[j] = words[j], words[i] })
		}
		want = slices.Sorted(slices.Values(words))
		order, orderPhrase = "in alphabetical order", c.pick(alphabetical[:])
	case 1:
		want = slices.Clone(words)
		slices.Reverse(want)
		order, orderPhrase = "in reverse order", c.pick(reversed[:])
	default:
		orderPhrase = c.pick(asGiven[:])
	}
	how := c.pick(inCapitalLetters[:]) + ", " + c.pick(onePerLine[:]) + orderPhrase + c.pick(nothingElse[:])
	verb := c.pick(writeVerbs[:])
	shown := c.wordList(words)
	var task, tail string
	switch c.r.IntN(4) {
	case 0: // Write these words in capitals, one per line: apple, river, candle
		task = strings.TrimSuffix(strings.TrimSuffix(c.polite(verb+" "+c.pick(theseWords[:])+" "+how), "."), "?") + ": " + shown
	case 1: // Here are some words: apple, river, candle. Write them in capitals, one per line.
		task = fmt.Sprintf(c.pick(hereAreWords[:]), shown) + " " + c.polite(verb+" them "+how)
	case 2: // Write the words apple, river and candle in capitals, one per line.
		task = c.polite(verb + " the words " + shown + " " + how)
	default: // Write these words in capitals, one per line:\n- apple\n- river
		task = c.polite(verb + " " + c.pick(theseWords[:]) + " " + how)
		if t, ok := strings.CutSuffix(task, "."); ok {
			task = t + ":"
		}
		tail = c.wordLines(words)
	}
	return Test{Kind: TestFormat, words: want, order: order, ask: "the words " + strings.Join(words, ", ") + " " + how,
		prompt: c.dress(task, formatSituations[:], tail)}
}

// wordList writes words inline: "apple, river, candle", "apple, river and candle", quoted, or
// capitalised.
func (c *composer) wordList(words []string) string {
	ws := slices.Clone(words)
	switch c.r.IntN(5) {
	case 0:
		for i, w := range ws {
			ws[i] = strconv.Quote(w)
		}
	case 1:
		for i, w := range ws {
			ws[i] = upperFirst(w)
		}
	}
	last := len(ws) - 1
	switch c.r.IntN(3) {
	case 0:
		return strings.Join(ws, ", ")
	case 1:
		return strings.Join(ws[:last], ", ") + " and " + ws[last]
	default:
		return strings.Join(ws[:last], ", ") + ", and " + ws[last]
	}
}

// wordLines writes words as a list of lines: bulleted or numbered, in lower case or
// capitalised.
func (c *composer) wordLines(words []string) string {
	var b strings.Builder
	bullet := c.pick([]string{"- ", "* ", "• ", "%d. ", "%d) "})
	title := c.chance(3)
	for i, w := range words {
		if title {
			w = upperFirst(w)
		}
		if strings.Contains(bullet, "%d") {
			fmt.Fprintf(&b, "\n"+bullet+"%s", i+1, w)
		} else {
			b.WriteString("\n" + bullet + w)
		}
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// The parts a request is written from. None holds a digit, a capital letter after its first,
// a list of words, or a word asking for capitals or lines: the task's data is the only one a
// message holds.
var (
	systemPrompts = [...]string{
		"You are a helpful assistant.",
		"You are a helpful assistant. Keep your answers short.",
		"You are a friendly, concise assistant.",
		"You are an assistant for a small online shop. Be brief and accurate.",
		"You are a helpful assistant. Follow the user's formatting instructions precisely.",
		"Answer as briefly as you can.",
	}
	openings = [...]string{
		"Hi!", "Hello.", "Hey there.", "Quick one.", "Quick question.", "Good morning!", "Hi, hope you are well.",
		"Sorry if this is a silly ask.", "Hello again.", "Hey.",
	}
	movingOn = [...]string{
		"Thanks! Something else now.", "Great, thank you. Unrelated question.", "Thanks. One more thing.",
		"Perfect. Different topic.", "Cool, thanks.",
	}
	closings = [...]string{"Thanks!", "Thank you.", "Cheers.", "Much appreciated.", "Thanks in advance."}
	names    = [...]string{
		"Priya", "Tom", "Maria", "Jonas", "Aiko", "Sam", "Lena", "Omar", "Chloe", "Diego", "Nina", "Ravi",
		"Hannah", "Mateo", "Zoe", "Ivan", "Grace", "Kofi", "Elif", "Marco",
	}
	places = [...]string{
		"Lisbon", "Denver", "Osaka", "Leeds", "Porto", "Austin", "Krakow", "Lyon", "Dublin", "Seattle",
		"Turin", "Ghent", "Nairobi", "Quebec", "Bergen", "Cork",
	}
	politeness = [...]string{"", "", "Please", "Could you", "Can you", "Would you", "I need you to", "Kindly"}

	// Situations, of a random {name} and {place}.
	echoSituations = [...]string{
		"I'm filling in a claim form for {name} and the website keeps rejecting what I paste.",
		"My colleague {name} read this out over the phone and I want to be sure I have it right.",
		"We're moving our records from the {place} office into a new system.",
		"The label printer at the {place} warehouse smudged the last one.",
		"I'm about to read this to a support agent and my screen reader garbles it.",
		"This is for a parcel {name} is sending from {place}.",
		"It came in an email from {name} and the font makes some of it hard to read.",
		"I'm setting up an account for {name} before the trip to {place}.",
	}
	sumSituations = [...]string{
		"I'm checking an invoice before I send it to {name}.",
		"Helping my nephew {name} with his homework tonight.",
		"My calculator app just crashed.",
		"Splitting the costs of a weekend in {place} with {name}.",
		"Double-checking a spreadsheet for the {place} office.",
		"Doing some mental math practice with {name}.",
		"I'm counting stock at our shop in {place}.",
		"My kid {name} asked me and I want to be sure.",
	}
	formatSituations = [...]string{
		"I'm making signs for {name}'s classroom.",
		"These are for the storage boxes in our {place} flat.",
		"I need headings for a short slide deck.",
		"Planning name tags for a workshop in {place}.",
		"It's for a poster {name} is printing.",
		"I'm testing how a small display shows text.",
		"We're labelling jars for the market in {place}.",
		"My friend {name} wants these for a party game.",
	}

	codeNouns = [...]string{
		"code", "reference", "order number", "booking reference", "tracking number", "ticket ID", "voucher code",
		"serial number", "confirmation code", "invoice number", "reference code", "product key",
	}
	codeDets      = [...]string{"this", "the following", "my"}
	codeSentences = [...]string{ // %[1]s: the noun, %[2]s: the code
		"My %[1]s is %[2]s.", "The %[1]s I was given is %[2]s.", "Here's the %[1]s: %[2]s.", "The %[1]s reads %[2]s.",
	}
	repeatVerbs = [...]string{ // %s: what to repeat
		"repeat %s", "copy %s", "write %s back", "echo %s", "type %s out", "reply with %s", "send %s back",
		"repeat %s back to me",
	}
	exactly     = [...]string{"exactly", "exactly as written", "verbatim", "character for character", "exactly as it appears", "without changing a character"}
	nothingElse = [...]string{", and nothing else", ", with no other text", " and nothing more", ", no extra words", "", ", no commentary"}

	sumForms         = [...]string{"%d + %d", "%d plus %d", "the sum of %d and %d", "%d and %d added together"}
	differenceForms  = [...]string{"%d - %d", "%d minus %d", "%d − %d", "the difference between %d and %d", "%d take away %d"}
	productForms     = [...]string{"%d × %d", "%d * %d", "%d x %d", "%d times %d", "%d multiplied by %d", "the product of %d and %d"}
	addCommands      = [...]string{"add %d and %d", "add %[2]d to %[1]d"}
	subtractCommands = [...]string{"subtract %[2]d from %[1]d", "take %[2]d away from %[1]d"}
	multiplyCommands = [...]string{"multiply %d by %d", "multiply %d and %d"}
	questions        = [...]string{ // %s: the sum
		"what is %s?", "what's %s?", "how much is %s?", "compute %s.", "calculate %s.", "work out %s.",
		"could you tell me what %s is?", "%s = ?", "quick check: what is %s?",
	}
	justTheNumber = [...]string{
		"Reply with just the number.", "Answer with the result only.", "Give only the number.", "Just the number, please.",
		"Only the final number, no working.", "Respond with a single number and nothing else.",
		"Please answer with one number only.", "No explanation, only the result.",
	}

	writeVerbs       = [...]string{"write", "list", "put", "rewrite", "print", "type", "return"}
	theseWords       = [...]string{"these words", "the following words", "the words below", "each of these words", "this list of words", "each word that follows"}
	hereAreWords     = [...]string{"Here are some words: %s.", "The words are %s.", "My words: %s.", "I have these words: %s."}
	inCapitalLetters = [...]string{"in capital letters", "in uppercase", "in upper case", "in all caps", "in uppercase letters", "in block capitals"}
	onePerLine       = [...]string{"one per line", "each on its own line", "on separate lines", "one word per line", "each on a separate line"}
	asGiven          = [...]string{"", "", ", in the order given", ", keeping their order"}
	alphabetical     = [...]string{", in alphabetical order", ", sorted alphabetically", ", sorted from a to z"}
	reversed         = [...]string{", in reverse order", ", from last to first", ", starting with the last one"}
)
