package simulate

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// benchMarket runs examples/market (1,000 nodes, 7 models) at scale for a duration, and
// reports the simulated requests per second of wall time and the peak heap.
func benchMarket(b *testing.B, scale, weight int, d time.Duration) {
	benchDemand(b, "demand.yaml", scale, weight, d)
}

func benchDemand(b *testing.B, demand string, scale, weight int, d time.Duration) {
	f, err := LoadFleet("../../examples/market/fleet.yaml")
	if err != nil {
		b.Fatal(err)
	}
	dm, err := LoadDemand("../../examples/market/" + demand)
	if err != nil {
		b.Fatal(err)
	}
	peakHeap := watchHeap()
	var requests int64
	for b.Loop() {
		rep, err := Run(context.Background(), f, dm, Options{Seed: 1, Duration: d, Scale: scale, Weight: weight})
		if err != nil {
			b.Fatal(err)
		}
		requests = (rep.Requests.Total + rep.Requests.ByTier[rowBatch].Total) / int64(weight)
	}
	b.ReportMetric(float64(requests), "simulated-requests")
	b.ReportMetric(float64(peakHeap()>>20), "peak-heap-MiB")
}

// watchHeap samples the heap every 100 ms until the function it returns is called, which
// returns the highest heap seen.
func watchHeap() func() uint64 {
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return peak
	}
}

// BenchmarkMarket_1000Nodes_Week is a week of the 1,000-node market, request by request.
func BenchmarkMarket_1000Nodes_Week(b *testing.B) { benchMarket(b, 1, 1, 7*24*time.Hour) }

// BenchmarkMarket_1000Nodes_Day is a day of it.
func BenchmarkMarket_1000Nodes_Day(b *testing.B) { benchMarket(b, 1, 1, 24*time.Hour) }

// BenchmarkMarket_1000Nodes_Week_Weight4 is the week with each simulated request standing for 4.
func BenchmarkMarket_1000Nodes_Week_Weight4(b *testing.B) { benchMarket(b, 1, 4, 7*24*time.Hour) }

// BenchmarkMarket_100kNodes_Minutes is two minutes of the market at 100,000 nodes, under the same
// live demand per node (weight 4): the cost of a decision of the default auction at that size,
// which walks every node cheaper than the first free one that is full or paused.
func BenchmarkMarket_100kNodes_Minutes(b *testing.B) {
	benchDemand(b, "demand-live.yaml", 100, 4, 2*time.Minute)
}

// BenchmarkMarket_100kNodes_Week_LightDemand is a week of the market's fleet at 100,000 nodes
// under a hundredth of the 1,000-node market's live demand: what the nodes' own events (windows,
// drops, index rebuilds) and memory cost at that size, with few decisions.
func BenchmarkMarket_100kNodes_Week_LightDemand(b *testing.B) {
	f, err := LoadFleet("../../examples/market/fleet.yaml")
	if err != nil {
		b.Fatal(err)
	}
	d, err := LoadDemand("../../examples/market/demand-live.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for i := range f.Classes {
		f.Classes[i].Count *= 100
	}
	for i := range d.Streams {
		d.Streams[i].Rate /= 100
	}
	peakHeap := watchHeap()
	var requests int64
	for b.Loop() {
		rep, err := Run(context.Background(), f, d, Options{Seed: 1, Duration: 7 * 24 * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		requests = rep.Requests.Total
	}
	b.ReportMetric(float64(requests), "simulated-requests")
	b.ReportMetric(float64(peakHeap()>>20), "peak-heap-MiB")
}
