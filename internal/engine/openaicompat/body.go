package openaicompat

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// appendRequest appends the JSON body of a streamed request for req, sent for the model named
// model. It is written by hand rather than with encoding/json, which would compact the raw
// fields and escape HTML in them: the buyer's messages, tools, tool_choice and response_format
// reach the server byte for byte, and it costs one allocation.
func appendRequest(b []byte, req *protocol.Request, model string) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = api.AppendString(b, model)
	switch req.Kind {
	case protocol.KindChat:
		if isUnset(req.Messages) {
			return nil, &engine.RequestError{Status: http.StatusBadRequest, Message: "messages is required"}
		}
		b = append(b, `,"messages":`...)
		b = append(b, req.Messages...)
	case protocol.KindCompletion:
		b = append(b, `,"prompt":`...)
		b = api.AppendString(b, req.Prompt)
	default:
		return nil, fmt.Errorf("openai engine: unknown request kind %q", req.Kind)
	}
	if req.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	var err error
	if req.Temperature != nil {
		if b, err = appendFloatField(b, `,"temperature":`, *req.Temperature); err != nil {
			return nil, err
		}
	}
	if req.TopP != nil {
		if b, err = appendFloatField(b, `,"top_p":`, *req.TopP); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{`,"frequency_penalty":`, req.FrequencyPenalty}, {`,"presence_penalty":`, req.PresencePenalty}} {
		if f.v != nil {
			if b, err = appendFloatField(b, f.name, *f.v); err != nil {
				return nil, err
			}
		}
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = api.AppendString(b, s)
		}
		b = append(b, ']')
	}
	b = appendRaw(b, `,"tools":`, req.Tools)
	b = appendRaw(b, `,"tool_choice":`, req.ToolChoice)
	b = appendRaw(b, `,"response_format":`, req.ResponseFormat)
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b, nil
}

// requestSize is a little more than the size of the body of req, so that the body is
// allocated once.
func requestSize(req *protocol.Request, model string) int {
	n := 160 + 2*len(model) + len(req.Messages) + 2*len(req.Prompt) +
		len(req.Tools) + len(req.ToolChoice) + len(req.ResponseFormat)
	for _, s := range req.Stop {
		n += 2*len(s) + 3
	}
	return n
}

// isUnset reports whether a raw field is absent or JSON null.
func isUnset(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func appendRaw(b []byte, key string, raw []byte) []byte {
	if isUnset(raw) {
		return b
	}
	b = append(b, key...)
	return append(b, raw...)
}

// appendFloatField appends key and f as encoding/json writes a float64.
func appendFloatField(b []byte, key string, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &engine.RequestError{Status: http.StatusBadRequest,
			Message: fmt.Sprintf("%s is not a finite number", key[2:len(key)-2])}
	}
	b = append(b, key...)
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64), nil
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), nil
}
