package sqlstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
)

// BenchmarkInsertReceipts measures what storing receipts costs as a coordinator's settlements
// do it, 200 at a time (a group commit's worth at 5,000 requests a second), into a table that
// holds many already: a request's receipts, with its request id (requestid.New) and a random
// job id, as the fleet makes them, and 1.2 KiB of signed JSON. cpu-µs/receipt is this process's
// CPU (user and system), the database's own work included on SQLite; on SQLite,
// written-KiB/receipt is what the process wrote meanwhile (/proc/self/io's wchar): the WAL,
// and its checkpoints into the database.
//
//	go test -run '^$' -bench InsertReceipts ./internal/store/sqlstore
func BenchmarkInsertReceipts(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, stored := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/stored=%d", kind, stored), func(b *testing.B) {
				db, _ := openTestDB(b, kind)
				ctx := context.Background()
				for n := 0; n < stored; n += 1000 {
					if err := db.InsertReceipts(ctx, benchReceipts(1000)); err != nil {
						b.Fatal(err)
					}
				}
				batches := make([][]*store.Receipt, 0, b.N/200+1)
				for n := 0; n < b.N; n += 200 {
					batches = append(batches, benchReceipts(min(200, b.N-n)))
				}
				cpu0, written0 := cpu(b), writtenBytes()
				b.ResetTimer()
				for _, rs := range batches {
					if err := db.InsertReceipts(ctx, rs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((cpu(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/receipt")
				if kind == "sqlite" && written0 >= 0 {
					b.ReportMetric(float64(writtenBytes()-written0)/1024/float64(b.N), "written-KiB/receipt")
				}
			})
		}
	}
}

var benchJobIDs = base32.StdEncoding.WithPadding(base32.NoPadding)

// benchReceipts returns n receipts of requests made now, each with a job id of random bits.
func benchReceipts(n int) []*store.Receipt {
	signed := []byte(`{"receipt":"` + string(bytes.Repeat([]byte{'x'}, 1200)) + `"}`)
	rs := make([]*store.Receipt, n)
	for i := range rs {
		var b [12]byte
		rand.Read(b[:])
		rs[i] = &store.Receipt{RequestID: requestid.New(), JobID: "job_" + benchJobIDs.EncodeToString(b[:]),
			NodeID: "node_bench", Signed: signed, CreatedAt: time.Now()}
	}
	return rs
}

// writtenBytes returns the bytes this process has written (Linux's wchar in /proc/self/io), or
// -1 where it cannot tell.
func writtenBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("wchar: ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// cpu is the CPU this process has used so far (bench.ProcessCPU).
func cpu(b *testing.B) time.Duration {
	d, err := bench.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
