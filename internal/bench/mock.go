package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// MockModel is the one model the mock upstream lists.
const MockModel = "mock"

// MockChunks is how many chunks with content a streamed answer of the mock upstream has.
const MockChunks = 20

// Mock is an OpenAI-compatible upstream that answers at once, whatever it is asked: GET
// /v1/models lists MockModel, and POST /v1/chat/completions answers with MockChunks words
// (fewer when the body's max_tokens or max_completion_tokens is less), streamed (a role
// chunk, a content chunk per word, a finish chunk, a usage chunk and data: [DONE]) when the
// body has "stream":true, else as one JSON answer, both with usage: 12 prompt tokens and a
// completion token per word. Its answers are prepared once, so that what it costs per request
// is net/http's serving and little else: the floor against which `shareai bench --compare`
// holds the network.
func Mock() http.Handler {
	streamed, whole := make([][]byte, MockChunks+1), make([][]byte, MockChunks+1)
	for n := 1; n <= MockChunks; n++ {
		streamed[n], whole[n] = mockAnswers(n)
	}
	models := []byte(`{"object":"list","data":[{"id":"` + MockModel + `","object":"model","max_model_len":8192}]}`)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(models)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":{"message":"request body too large","type":"invalid_request_error","code":null}}`, http.StatusRequestEntityTooLarge)
			return
		}
		n := MockChunks
		for _, key := range []string{`"max_tokens"`, `"max_completion_tokens"`} {
			if v, ok := valueAfter(body, key); ok {
				if m := leadingInt(v); m > 0 && m < n {
					n = m
				}
			}
		}
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(streamed[n])
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(whole[n])
	})
	return mux
}

// mockAnswers are the mock's answers of n words, streamed and whole.
func mockAnswers(n int) (streamed, whole []byte) {
	var stream, words bytes.Buffer
	const chunk = `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"` + MockModel + `","choices":[`
	usage := fmt.Sprintf(`"usage":{"prompt_tokens":12,"completion_tokens":%d,"total_tokens":%d}`, n, 12+n)
	stream.WriteString(chunk + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&stream, chunk+`{"index":0,"delta":{"content":" word%d"},"finish_reason":null}]}`+"\n\n", i)
		if i > 0 {
			words.WriteByte(' ')
		}
		fmt.Fprintf(&words, "word%d", i)
	}
	finish := "stop"
	if n < MockChunks {
		finish = "length"
	}
	stream.WriteString(chunk + `{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}` + "\n\n")
	stream.WriteString(chunk + `],` + usage + "}\n\n")
	stream.WriteString("data: [DONE]\n\n")
	whole = []byte(`{"id":"x","object":"chat.completion","created":1,"model":"` + MockModel + `","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		words.String() + `"},"finish_reason":"` + finish + `"}],` + usage + `}`)
	return stream.Bytes(), whole
}

// leadingInt is the non-negative integer v starts with; 0 when it starts with none.
func leadingInt(v []byte) int {
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<20 {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
