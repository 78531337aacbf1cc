package protocol

import "github.com/shareai/shareai/internal/jsondec"

// decodeFrame decodes one frame of a job (delta, end, credit, cancel, receipt) as encoding/json
// would, in one pass and without reflection (jsondec); it reports false, having decided
// nothing, for any other frame or anything unusual, which encoding/json then decodes.
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
