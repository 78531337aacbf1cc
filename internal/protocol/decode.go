package protocol

import "github.com/shareai/shareai/internal/jsondec"

// decodeFrame decodes one frame of a job (its request, delta, end, credit, cancel, receipt) as
// encoding/json would, in one pass and without reflection (jsondec); it reports false, having
// decided nothing, for any other frame or anything unusual, which encoding/json then decodes.
// FuzzDecodeFrame holds the two to the same frames.
func decodeFrame(line []byte, fr *Frame) bool {
	d := jsondec.New(line)
	var f Frame
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "t":
			return d.Once(0) && d.String(&f.Type)
		case "job":
			return d.Once(1) && d.String(&f.Job)
		case "credit":
			return d.Once(2) && d.Int(&f.Credit)
		case "receipt":
			return d.Once(3) && d.Raw(&f.Receipt)
		case "delta":
			f.Delta = new(Delta)
			return d.Once(4) && decodeDelta(&d, f.Delta)
		case "end":
			f.End = new(End)
			return d.Once(5) && decodeEnd(&d, f.End)
		case "request":
			f.Request = new(Request)
			return d.Once(6) && decodeRequest(&d, f.Request)
		case "trace":
			return d.Once(7) && decodeTrace(&d, &f.Trace)
		}
		return false
	})
	if !ok || !d.End() {
		return false
	}
	*fr = f
	return true
}

func decodeDelta(d *jsondec.Decoder, v *Delta) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "n":
			return d.Once(0) && d.Int(&v.Pieces)
		case "text":
			return d.Once(1) && d.String(&v.Text)
		case "reasoning":
			return d.Once(2) && d.String(&v.Reasoning)
		case "tool_calls":
			return d.Once(3) && d.Raw(&v.ToolCalls)
		}
		return false
	})
}

func decodeEnd(d *jsondec.Decoder, v *End) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "finish_reason":
			return d.Once(0) && d.String(&v.FinishReason)
		case "usage":
			return d.Once(1) && d.Object(func(key []byte) bool {
				switch string(key) {
				case "prompt_tokens":
					return d.Once(0) && d.Int(&v.Usage.PromptTokens)
				case "completion_tokens":
					return d.Once(1) && d.Int(&v.Usage.CompletionTokens)
				}
				return false
			})
		case "estimated":
			return d.Once(2) && d.Bool(&v.Estimated)
		case "receipt":
			return d.Once(3) && d.Raw(&v.Receipt)
		case "receipt_follows":
			return d.Once(4) && d.Bool(&v.ReceiptFollows)
		}
		return false
	})
}

func decodeRequest(d *jsondec.Decoder, r *Request) bool {
	float := func(bit uint, f **float64) bool {
		*f = new(float64)
		return d.Once(bit) && d.Float64(*f)
	}
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "kind":
			return d.Once(0) && d.String(&r.Kind)
		case "model":
			return d.Once(1) && d.String(&r.Model)
		case "messages":
			return d.Once(2) && d.Raw(&r.Messages)
		case "prompt":
			return d.Once(3) && d.String(&r.Prompt)
		case "max_tokens":
			return d.Once(4) && d.Int(&r.MaxTokens)
		case "temperature":
			return float(5, &r.Temperature)
		case "top_p":
			return float(6, &r.TopP)
		case "seed":
			r.Seed = new(int64)
			return d.Once(7) && d.Int64(r.Seed)
		case "stop":
			r.Stop = []string{} // as encoding/json fills a slice from [], not nil
			return d.Once(8) && d.Array(func() bool {
				var s string
				if !d.String(&s) {
					return false
				}
				r.Stop = append(r.Stop, s)
				return true
			})
		case "frequency_penalty":
			return float(9, &r.FrequencyPenalty)
		case "presence_penalty":
			return float(10, &r.PresencePenalty)
		case "continue":
			return d.Once(11) && d.Bool(&r.Continue)
		case "partial":
			return d.Once(12) && d.String(&r.Partial)
		case "tools":
			return d.Once(13) && d.Raw(&r.Tools)
		case "tool_choice":
			return d.Once(14) && d.Raw(&r.ToolChoice)
		case "response_format":
			return d.Once(15) && d.Raw(&r.ResponseFormat)
		}
		return false
	})
}

// decodeTrace reads a trace context's members; a member twice, which encoding/json takes
// (the last), goes to it.
func decodeTrace(d *jsondec.Decoder, trace *map[string]string) bool {
	m := map[string]string{}
	*trace = m
	return d.Object(func(key []byte) bool {
		var v string
		if _, twice := m[string(key)]; twice || !d.String(&v) {
			return false
		}
		m[string(key)] = v
		return true
	})
}
