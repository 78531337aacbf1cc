package verify

import (
	"bytes"
	"encoding/json"

	"github.com/shareai/shareai/internal/protocol"
)

// A probe must be indistinguishable from a buyer's request. A node that could tell probes
// would serve the claimed model to them and something cheaper to everyone else, and every
// check would pass while buyers were cheated. So a probe is an ordinary job frame with an
// ordinary chat request, built the way the gateway builds a buyer's (api.ChatRequest.Job):
// Messages are the bytes a buyer's client sends, passed intact; no field is set that a buyer
// could not set, and none is left out that most buyers send. The prompts are what buyers
// really ask (questions, code, summaries, rewrites, short creative asks, a system prompt, a
// multi-turn chat, a few in other languages), and their Messages are encoded as the common
// clients encode them: compact JSON, "role" before "content", UTF-8 unescaped and no HTML
// escaping (as the OpenAI Python SDK over httpx 0.28 and later sends; Go's json.Marshal would
// write \u003c for '<', which no such client does).
//
// What can still give a probe away, honestly:
//
//   - Sampling. A probe asks for temperature 0 with a seed, so that an honest node's answer is
//     reproducible. Evaluations, agents and extraction pipelines send that too, but many
//     buyers send neither (the default temperature is 1). A node that cheats only on sampled
//     requests, whose answers nobody can check, is not caught by probes.
//   - Length. max_tokens is between 48 and 96, so that a probe costs little. Buyers often send
//     none, or thousands. A node that cheats only on long answers is not caught either; as
//     [Agree] accepts an answer cut short, the prober may send larger max_tokens (or none) now
//     and then and still compare.
//   - Repetition. The prompts are a fixed set of NumProbes: a node that records every prompt
//     it sees can learn, over many probes, which ones come back, and answer them honestly. A
//     larger set, rotated, or prompts drawn from real traffic, would make that harder.
//   - Everything around the request: when probes come (the prober draws random times), from
//     which account they are paid (a node sees its earnings per job only if the coordinator
//     tells it), whether a conversation ever continues (a probe never has a next turn).
//
// Probes are chats without tools, response_format or stop strings: those would make answers
// shorter or more constrained, and so less telling of the model behind them.

// turn is one message of a probe's conversation. parts sends the content as an array with one
// text part, as some clients do, rather than a string.
type turn struct {
	role, text string
	parts      bool
}

func user(s string) turn      { return turn{role: "user", text: s} }
func system(s string) turn    { return turn{role: "system", text: s} }
func assistant(s string) turn { return turn{role: "assistant", text: s} }

// prompts are the probes' conversations. Every one ends with the user's message (one ending
// with the assistant's would ask a node to continue that answer). Most ask for an answer
// longer than max_tokens, that different models word differently; few have one canonical
// answer, which a smaller model would give as well.
var prompts = [...][]turn{
	{user("What's the difference between a process and a thread? Keep it short.")},
	{user("Explain how HTTPS keeps my password safe when I log in to a website.")},
	{user("Write a Python function that checks whether a string is a palindrome, ignoring spaces, punctuation and case.")},
	{user("Summarize the following in two sentences:\n\nThe city council met on Tuesday to discuss the proposed bike lanes on Main Street. " +
		"Supporters argued that the lanes would reduce traffic accidents and encourage people to shop locally, while several " +
		"business owners worried about losing parking spaces in front of their stores. After three hours of public comment, " +
		"the council voted 5-2 to approve a six-month pilot program, with a review of accident data and sales figures scheduled for next spring.")},
	{user("Give me 5 name ideas for a small coffee shop that also sells used books.")},
	{system("You are a helpful assistant. Answer in a friendly, concise tone."), user("How do I keep basil alive on a windowsill?")},
	{
		user("I'm planning a 3-day trip to Lisbon in April. Any general advice?"),
		assistant("That sounds lovely! April is a great time to visit Lisbon: the weather is mild, usually around 18-22°C, " +
			"and the summer crowds haven't arrived yet. Bring comfortable shoes, since the city is very hilly and the " +
			"sidewalks are made of slippery limestone. A Viva Viagem card will cover trams, buses and the metro."),
		user("Great, thanks. What should I not miss on the first day?"),
	},
	{user("Translate to French: \"The meeting has been moved to Thursday at 3pm. Please bring the quarterly report.\"")},
	{user("Write a haiku about a server room at night.")},
	{user("why does my sourdough always come out so dense")},
	{user("Can you write a SQL query that returns the top 3 customers by total order value in 2023? " +
		"Tables: customers(id, name), orders(id, customer_id, total, created_at)")},
	{user("Explain recursion to a 10-year-old.")},
	{
		system("You are a senior Go engineer reviewing code. Be direct."),
		user("Is there anything wrong with this?\n\nfunc sum(xs []int) int {\n\tvar t int\n\tfor i := 0; i <= len(xs); i++ {\n\t\tt += xs[i]\n\t}\n\treturn t\n}"),
	},
	{user("Draft a polite email to my landlord asking when the broken heater will be fixed. It's been two weeks and it's getting cold.")},
	{user("What are the pros and cons of index funds vs picking individual stocks?")},
	{user("tl;dr this:\n\nA new study followed 120 adults for six weeks to measure how sleep affects memory. Participants who slept " +
		"at least seven hours a night remembered 25% more words on a recall test than those who slept five hours or less. " +
		"The researchers also found that short naps in the afternoon partly made up for a bad night, but only when the nap " +
		"lasted under 30 minutes. They caution that the sample was small and mostly made up of university students.")},
	{
		user("What's a good beginner houseplant?"),
		assistant("A pothos is a great choice. It tolerates low light, forgives the occasional missed watering, and grows " +
			"quickly, so you see progress. Water it when the top inch of soil is dry, and keep it out of direct afternoon sun."),
		user("Is it safe for cats?"),
	},
	{user("Write a regex that matches US ZIP codes, both 12345 and 12345-6789, and explain it.")},
	{user("Tell me a short story about a lighthouse keeper who finds a message in a bottle. Under 100 words.")},
	{user("¿Cuál es la diferencia entre \"ser\" y \"estar\"? Dame algunos ejemplos.")},
	{user("Compare PostgreSQL and MongoDB for a small e-commerce app. Which would you pick?")},
	{
		system("You are a customer support agent for Acme Cloud. Only answer questions about Acme Cloud products. " +
			"If you don't know the answer, tell the customer to open a ticket at support.acme.example."),
		user("Hi, how do I rotate my API key without downtime?"),
	},
	{user("What causes the seasons on Earth?")},
	{user("Rewrite this to sound more professional: hey guys the build is broken AGAIN, can someone pls look at it asap, its blocking me & the release")},
	{user("Write a bash one-liner to find the 10 largest files under the current directory.")},
	{{role: "user", text: "Give me three tips for my first job interview next week. It's for a junior data analyst position.", parts: true}},
	{user("Explain the difference between let, const and var in JavaScript.")},
	{
		user("Write a JavaScript function that debounces another function."),
		assistant("Here's a simple debounce:\n\n```javascript\nfunction debounce(fn, wait) {\n  let timer;\n  return function (...args) {\n" +
			"    clearTimeout(timer);\n    timer = setTimeout(() => fn.apply(this, args), wait);\n  };\n}\n```\n\n" +
			"Each call resets the timer, so `fn` only runs once the calls stop for `wait` milliseconds."),
		user("Can you add TypeScript types to it?"),
	},
	{user("What is the time complexity of quicksort, and why is the worst case O(n^2)?")},
	{user("Suggest a weekly workout plan for someone who can only train 3 days a week at home, with no equipment.")},
	{user("Summarize the plot of Romeo and Juliet in a few sentences.")},
	{user("Write a limerick about a cat who learns to code.")},
	{
		system("Extract the key facts from the user's text as a bulleted list: people, dates, decisions, open questions."),
		user("Notes from the planning call, March 4: Priya will own the migration to the new billing provider; target date is " +
			"April 15. Tom raised concerns about the webhook retries & asked for a load test first. We agreed to freeze " +
			"pricing changes until the migration is done. Still unclear: who talks to the legal team about the new terms?"),
	},
	{user("I have chicken thighs, rice, spinach and a lemon. What can I cook tonight?")},
	{user("Is it better to pay off my student loans early or invest the extra money? I'm 27 and the interest rate is 5%.")},
	{user("Explain what a Kubernetes pod is and how it differs from a container.")},
	{
		system("You are a patient math tutor. Explain step by step."),
		user("What is a derivative, intuitively?"),
		assistant("Intuitively, a derivative tells you how fast something is changing at a single instant. If f(x) is your " +
			"position over time, f'(x) is your speed at time x: the slope of the curve at that point."),
		user("ok so what's the derivative of x^2 * sin(x)?"),
	},
	{user("Write a product description for noise-cancelling headphones aimed at students. 2-3 sentences.")},
	{user("Was ist der Unterschied zwischen einer GmbH und einer UG? Kurz bitte.")},
	{user("Convert this JSON to YAML:\n\n{\"name\": \"shop\", \"replicas\": 3, \"ports\": [80, 443], \"env\": {\"DEBUG\": \"false\", \"REGION\": \"eu-west-1\"}}")},
}

// NumProbes is the number of distinct probe conversations. Probe(i) and Probe(i+NumProbes)
// ask the same thing, with another seed and max_tokens (most likely).
const NumProbes = len(prompts)

// seeds are seeds buyers commonly send: a probe's seed is one of them, as a large random seed
// would stand out.
var seeds = [...]int64{42, 1234, 0, 7, 123, 2024, 1, 12345, 31337, 99, 100, 2025, 3407, 1337, 777, 8}

// maxTokens are max_tokens buyers commonly send, between 48 and 96.
var maxTokens = [...]int{48, 50, 60, 64, 64, 72, 75, 80, 80, 90, 96, 96, 56, 70, 85, 64}

// Probe returns probe i for model: a chat request asking prompt i mod NumProbes, at
// temperature 0 with a seed and a max_tokens that depend on i. The same i always gives the
// same request; each call returns a new one, which the caller may change.
func Probe(i int, model string) *protocol.Request {
	k := i % NumProbes
	if k < 0 {
		k += NumProbes
	}
	h := mix(uint64(i))
	temperature := 0.0
	seed := seeds[h%uint64(len(seeds))]
	return &protocol.Request{
		Kind:        protocol.KindChat,
		Model:       model,
		Messages:    encode(prompts[k]),
		MaxTokens:   maxTokens[(h>>32)%uint64(len(maxTokens))],
		Temperature: &temperature,
		Seed:        &seed,
	}
}

// mix is SplitMix64's finalizer: it spreads a probe's index over 64 bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// wireMessage is a chat message as clients send it: role first.
type wireMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // a string, or []textPart
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// encode writes a conversation as a client sends it: compact JSON, UTF-8 unescaped, no HTML
// escaping.
func encode(turns []turn) json.RawMessage {
	msgs := make([]wireMessage, len(turns))
	for i, t := range turns {
		msgs[i] = wireMessage{Role: t.role, Content: t.text}
		if t.parts {
			msgs[i].Content = []textPart{{Type: "text", Text: t.text}}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msgs); err != nil {
		panic("verify: encode a probe: " + err.Error()) // strings always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// PromptEstimate bounds from above the tokens an engine counts for a chat's messages (their
// JSON, as a probe sends them): a token per 3 bytes (English runs at about 4), 8 a message
// for the chat template's markers, and 48 for what a template adds (a default system prompt,
// the assistant's header).
func PromptEstimate(messages []byte) int {
	return (len(messages)+2)/3 + 8*bytes.Count(messages, []byte(`{"role":`)) + 48
}

// FitProbe returns probe i for model fitted to a context of contextLength tokens (0: unknown,
// no limit), so that a node with a small context (llama.cpp started with -c 512, say) gets
// probes it can answer whole: the first of probes i, i+1, … whose prompt and max_tokens fit;
// if none does, the one with the shortest prompt, its max_tokens cut to fit (at least 16).
func FitProbe(i int, model string, contextLength int) *protocol.Request {
	if contextLength <= 0 {
		return Probe(i, model)
	}
	var shortest *protocol.Request
	for k := range NumProbes {
		req := Probe(i+k, model)
		prompt := PromptEstimate(req.Messages)
		if prompt+req.MaxTokens <= contextLength {
			return req
		}
		if shortest == nil || prompt < PromptEstimate(shortest.Messages) {
			shortest = req
		}
	}
	shortest.MaxTokens = fitTokens(shortest.MaxTokens, PromptEstimate(shortest.Messages), contextLength)
	return shortest
}
