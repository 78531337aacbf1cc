package api_test

import (
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/api"
)

// TestChatRequest_Values checks OpenAI's documented ranges and values: out of them is
// invalid_value; within them but asking for what no node does is unsupported_parameter.
func TestChatRequest_Values(t *testing.T) {
	tests := []struct {
		more        string
		code, param string // "" for accepted
	}{
		{`"temperature":2,"top_p":0,"frequency_penalty":0,"presence_penalty":-0,"n":1,"top_logprobs":0,"logit_bias":{}`, "", ""},
		{`"temperature":2.01`, "invalid_value", "temperature"},
		{`"temperature":-0.1`, "invalid_value", "temperature"},
		{`"top_p":1.5`, "invalid_value", "top_p"},
		{`"frequency_penalty":-2.5`, "invalid_value", "frequency_penalty"},
		{`"frequency_penalty":1`, "", ""},
		{`"presence_penalty":2.5`, "invalid_value", "presence_penalty"},
		{`"presence_penalty":-1`, "", ""},
		{`"logit_bias":{"50256":101}`, "invalid_value", "logit_bias"},
		{`"logit_bias":{"-1":1}`, "invalid_value", "logit_bias"},
		{`"logit_bias":{"50256":-100}`, "unsupported_parameter", "logit_bias"},
		{`"top_logprobs":-1`, "invalid_value", "top_logprobs"},
		{`"top_logprobs":21`, "invalid_value", "top_logprobs"},
		{`"top_logprobs":3`, "unsupported_parameter", "top_logprobs"},
		{`"logprobs":false`, "", ""},
		{`"logprobs":true`, "unsupported_parameter", "logprobs"},
		{`"n":0`, "invalid_value", "n"},
		{`"n":129`, "invalid_value", "n"},
		{`"n":2`, "unsupported_parameter", "n"},
		{`"max_tokens":0`, "invalid_value", "max_tokens"},
		{`"max_completion_tokens":0`, "invalid_value", "max_completion_tokens"},
		{`"response_format":{"type":"text"}`, "", ""},
		{`"response_format":{"type":"json_object"}`, "", ""},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"answer_1","schema":{"type":"object"},"strict":true}}`, "", ""},
		{`"response_format":{"type":"xml"}`, "invalid_value", "response_format.type"},
		{`"response_format":{}`, "invalid_value", "response_format.type"},
		{`"response_format":"json"`, "invalid_value", "response_format"},
		{`"response_format":{"type":"json_schema"}`, "invalid_value", "response_format.json_schema"},
		{`"response_format":{"type":"json_schema","json_schema":[]}`, "invalid_value", "response_format.json_schema"},
		{`"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`, "invalid_value", "response_format.json_schema.name"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"a b"}}`, "invalid_value", "response_format.json_schema.name"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":true}}`, "invalid_value", "response_format.json_schema.schema"},
		{`"tools":{}`, "invalid_value", "tools"},
		{`"tool_choice":"auto","parallel_tool_calls":false`, "", ""},
		{`"tool_choice":1`, "invalid_value", "tool_choice"},
		{`"service_tier":"priority"`, "", ""},
		{`"service_tier":"auto"`, "", ""},
		{`"service_tier":"default"`, "", ""},
		{`"service_tier":"flex"`, "", ""},
		{`"service_tier":null`, "", ""},
		{`"service_tier":"scale"`, "invalid_value", "service_tier"},
		{`"service_tier":"gold"`, "invalid_value", "service_tier"},
		{`"provider":{"sort":"price"},"models":["a","b"],"user":"u","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}`, "", ""},
		{`"provider":"cheap"`, "invalid_value", "provider"},
		{`"split":null`, "", ""},
		{`"route":"fallback","models":["a"]`, "", ""},
		{`"route":"sideways"`, "invalid_value", "route"},
		{`"split":{"sim/qwen-2.5-7b":0.2}`, "", ""},
		{`"split":{"parts":2}`, "invalid_value", "split.parts"},
		{`"store":true,"metadata":{"k":"v"},"prompt_cache_key":"c","prompt_cache_retention":"24h","prompt_cache_options":{},"safety_identifier":"s"`, "", ""},
		{`"reasoning_effort":"high","verbosity":"low","prediction":{"type":"content","content":"x"},"modalities":["text"]`, "", ""},
		{`"reasoning_effort":"extreme"`, "invalid_value", "reasoning_effort"},
		{`"verbosity":"loud"`, "invalid_value", "verbosity"},
		{`"prompt_cache_retention":"1h"`, "invalid_value", "prompt_cache_retention"},
		{`"prediction":"x"`, "invalid_value", "prediction"},
		{`"modalities":["text","audio"]`, "unsupported_parameter", "modalities"},
		{`"modalities":["video"]`, "invalid_value", "modalities[0]"},
		{`"audio":{"voice":"alloy","format":"mp3"}`, "unsupported_parameter", "audio"},
		{`"functions":[{"name":"f"}]`, "unsupported_parameter", "functions"},
		{`"function_call":"auto"`, "unsupported_parameter", "function_call"},
		{`"web_search_options":{}`, "unsupported_parameter", "web_search_options"},
		{`"moderation":{"model":"m"}`, "unsupported_parameter", "moderation"},
		{`"audio":null,"functions":null,"function_call":null,"web_search_options":null,"moderation":null,"modalities":null`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.more, func(t *testing.T) {
			err := decodeChat(chatBody(tt.more))
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("refused: %v (param %q)", err, err.Param)
			case tt.code != "" && err == nil:
				t.Fatalf("accepted; want %s on %q", tt.code, tt.param)
			case tt.code != "" && (err.Status != 400 || err.Code != tt.code || err.Param != tt.param):
				t.Fatalf("got %d %s on %q (%s); want 400 %s on %q", err.Status, err.Code, err.Param, err.Message, tt.code, tt.param)
			}
		})
	}
}

func TestCompletionRequest_Values(t *testing.T) {
	tests := []struct {
		more        string
		code, param string
	}{
		{`"best_of":1,"echo":false,"logit_bias":null,"frequency_penalty":0,"presence_penalty":0,"n":1,"service_tier":"flex"`, "", ""},
		{`"best_of":21`, "invalid_value", "best_of"},
		{`"best_of":2`, "unsupported_parameter", "best_of"},
		{`"logprobs":6`, "invalid_value", "logprobs"},
		{`"logprobs":0`, "unsupported_parameter", "logprobs"},
		{`"echo":true`, "unsupported_parameter", "echo"},
		{`"suffix":"x"`, "unsupported_parameter", "suffix"},
		{`"frequency_penalty":3`, "invalid_value", "frequency_penalty"},
		{`"temperature":3`, "invalid_value", "temperature"},
		{`"max_tokens":0`, "invalid_value", "max_tokens"},
		{`"service_tier":"fast"`, "invalid_value", "service_tier"},
		{`"prompt":["a","b"]`, "unsupported_parameter", "prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.more, func(t *testing.T) {
			var req api.CompletionRequest
			err := api.Decode(strings.NewReader(`{"model":"m","prompt":"p",`+tt.more+`}`), &req)
			if err == nil {
				_, err = req.Job()
			}
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("refused: %v (param %q)", err, err.Param)
			case tt.code != "" && (err == nil || err.Code != tt.code || err.Param != tt.param):
				t.Fatalf("got %v; want %s on %q", err, tt.code, tt.param)
			}
		})
	}
}

// The penalties reach the engine's request; a neutral 0 is not sent.
func TestRequests_Penalties(t *testing.T) {
	var chat api.ChatRequest
	if err := api.Decode(strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"frequency_penalty":0.5,"presence_penalty":0}`), &chat); err != nil {
		t.Fatal(err)
	}
	req, err := chat.Job()
	if err != nil {
		t.Fatal(err)
	}
	if req.FrequencyPenalty == nil || *req.FrequencyPenalty != 0.5 || req.PresencePenalty != nil {
		t.Errorf("chat job penalties %v, %v; want 0.5 and none", req.FrequencyPenalty, req.PresencePenalty)
	}
	var completion api.CompletionRequest
	if err := api.Decode(strings.NewReader(`{"model":"m","prompt":"p","presence_penalty":-2}`), &completion); err != nil {
		t.Fatal(err)
	}
	if req, err = completion.Job(); err != nil || req.PresencePenalty == nil || *req.PresencePenalty != -2 {
		t.Errorf("completion job: %v, %+v; want presence_penalty -2", err, req)
	}
}
