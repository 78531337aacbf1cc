package hw

import (
	"context"

	"github.com/shareai/shareai/internal/protocol"
)

// Sample reads the GPUs' live state for a heartbeat: memory used and total, temperature, power
// draw and limit, utilization. A field the tool cannot read is nil. vendor is the node's, from
// [Vendor]. Apple's and CPU-only nodes have no tool to read: Sample returns nil, nil for them
// (and for any vendor it does not know). Telemetry.Processes is left nil: see [Processes].
func Sample(ctx context.Context, run Runner, vendor string) (*protocol.Telemetry, error) {
	if run == nil {
		run = Exec
	}
	switch vendor {
	case VendorNVIDIA:
		recs, err := queryNVIDIA(ctx, run)
		if err != nil {
			return nil, err
		}
		return &protocol.Telemetry{GPUs: nvidiaStats(recs)}, nil
	case VendorAMD:
		cards, _, err := queryAMD(ctx, run)
		if err != nil {
			return nil, err
		}
		return &protocol.Telemetry{GPUs: amdStats(cards)}, nil
	default:
		return nil, nil
	}
}
