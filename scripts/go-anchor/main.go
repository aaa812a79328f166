// The Go anchor of `almanac-bench grpc`: Google's Go Bigtable client driving either
// the official in-memory emulator (bttest) or Almanac, with the same phases as the
// Rust load generator (crates/bench/src/grpc.rs), so both servers are measured by
// one client in one run.
//
//	go-anchor emulator ADDR            serve bttest on ADDR until killed
//	go-anchor bench ADDR SERVER_PID    run the phases against the server at ADDR
//
// Phases: preload (ApplyBulk, 100 rows of 1 KiB a request), point reads (ReadRow),
// single-row writes (Apply), batched writes (ApplyBulk x100), one full scan at a
// time (ReadRows). 16 goroutines share one client (its default pool of 4
// connections). Each phase prints ops/s, p50/p99 latency and the server's CPU time
// per operation from /proc/PID/stat.
//
// Built by scripts/bench-grpc-go with Debian's golang-go and golang-google-cloud-dev
// (GOPATH mode, no module download).
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
)

const (
	concurrency = 16
	rows        = 100000
	batch       = 100
	valueBytes  = 1024
	phase       = 4 * time.Second
	clockTicks  = 100.0
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "emulator" {
		srv, err := bttest.NewServer(os.Args[2])
		if err != nil {
			fail(err)
		}
		fmt.Printf("bttest listening on %s\n", srv.Addr)
		select {}
	}
	if len(os.Args) != 4 || os.Args[1] != "bench" {
		fmt.Fprintln(os.Stderr, "usage: go-anchor emulator ADDR | go-anchor bench ADDR SERVER_PID")
		os.Exit(2)
	}
	os.Setenv("BIGTABLE_EMULATOR_HOST", os.Args[2])
	pid, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fail(err)
	}
	if err := run(pid); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "go-anchor:", err)
	os.Exit(1)
}

// cpuSecs reads utime+stime of a process.
func cpuSecs(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		fail(err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(fields[11], 64)
	k, _ := strconv.ParseFloat(fields[12], 64)
	return (u + k) / clockTicks
}

func key(i uint64) string {
	return fmt.Sprintf("user%016x", i*0x9E3779B97F4A7C15)
}

type result struct {
	ops       uint64
	latencies []time.Duration
	wall      time.Duration
	cpu       float64
}

func (r *result) print(name, unit string, perSec float64, rate string) {
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	pct := func(q float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[int(q*float64(len(r.latencies)-1))]
	}
	fmt.Printf("%-34s %12.0f %-8s p50 %9s  p99 %9s  server CPU %6.1f µs/%s (%d requests in %.2f s)\n",
		name, perSec, rate, pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		r.cpu/float64(r.ops)*1e6, unit, len(r.latencies), r.wall.Seconds())
}

// timed runs op from n goroutines for the phase length; op returns the operations it did.
func timed(pid, n int, op func(task int, seq uint64, r uint64) (uint64, error)) (*result, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		total    uint64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	cpu0 := cpuSecs(pid)
	start := time.Now()
	deadline := start.Add(phase)
	for t := 0; t < n; t++ {
		wg.Add(1)
		go func(task int) {
			defer wg.Done()
			var local []time.Duration
			var ops uint64
			rng := uint64(task)*0x2545F4914F6CDD1D + 1
			for seq := uint64(0); time.Now().Before(deadline); seq++ {
				rng ^= rng << 13
				rng ^= rng >> 7
				rng ^= rng << 17
				t0 := time.Now()
				k, err := op(task, seq, rng)
				if err != nil {
					firstErr.Store(err)
					return
				}
				local = append(local, time.Since(t0))
				ops += k
			}
			mu.Lock()
			all = append(all, local...)
			total += ops
			mu.Unlock()
		}(t)
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return nil, e.(error)
	}
	return &result{ops: total, latencies: all, wall: time.Since(start), cpu: cpuSecs(pid) - cpu0}, nil
}

func applyBulk(ctx context.Context, tbl *bigtable.Table, keys []string, value []byte) error {
	muts := make([]*bigtable.Mutation, len(keys))
	for i := range keys {
		m := bigtable.NewMutation()
		m.Set("cf", "v", bigtable.ServerTime, value)
		muts[i] = m
	}
	errs, err := tbl.ApplyBulk(ctx, keys, muts)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func run(pid int) error {
	ctx := context.Background()
	admin, err := bigtable.NewAdminClient(ctx, "almanac", "bench")
	if err != nil {
		return err
	}
	client, err := bigtable.NewClient(ctx, "almanac", "bench")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("gobench-%d", os.Getpid())
	writes := name + "-writes"
	for _, t := range []string{name, writes} {
		if err := admin.CreateTable(ctx, t); err != nil {
			return fmt.Errorf("CreateTable %s: %v", t, err)
		}
		if err := admin.CreateColumnFamily(ctx, t, "cf"); err != nil {
			return fmt.Errorf("CreateColumnFamily %s: %v", t, err)
		}
	}
	defer func() {
		for _, t := range []string{name, writes} {
			_ = admin.DeleteTable(ctx, t)
		}
	}()
	tbl, wtbl := client.Open(name), client.Open(writes)
	value := make([]byte, valueBytes)
	for i := range value {
		value[i] = 0xA5
	}
	fmt.Printf("go-anchor: Go client (cloud.google.com/go/bigtable) at %s, %d rows of %d B values, %s phases, %d goroutines, server pid %d\n",
		os.Getenv("BIGTABLE_EMULATOR_HOST"), rows, valueBytes, phase, concurrency, pid)

	// Preload: batch b holds rows b*batch .. (b+1)*batch; goroutine t takes t, t+C, ...
	var next uint64
	cpu0 := cpuSecs(pid)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	var preErr atomic.Value
	for t := 0; t < concurrency; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := atomic.AddUint64(&next, 1) - 1
				if b*batch >= rows {
					return
				}
				keys := make([]string, 0, batch)
				for i := b * batch; i < (b+1)*batch && i < rows; i++ {
					keys = append(keys, key(i))
				}
				t0 := time.Now()
				if err := applyBulk(ctx, tbl, keys, value); err != nil {
					preErr.Store(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if e := preErr.Load(); e != nil {
		return e.(error)
	}
	pre := &result{ops: rows, latencies: lat, wall: time.Since(start), cpu: cpuSecs(pid) - cpu0}
	pre.print("preload (ApplyBulk x100)", "row", float64(rows)/pre.wall.Seconds(), "rows/s")

	r, err := timed(pid, concurrency, func(_ int, _ uint64, rnd uint64) (uint64, error) {
		row, err := tbl.ReadRow(ctx, key(rnd%rows))
		if err != nil {
			return 0, err
		}
		if len(row["cf"]) != 1 {
			return 0, fmt.Errorf("point read found %d cells, expected 1", len(row["cf"]))
		}
		return 1, nil
	})
	if err != nil {
		return err
	}
	r.print("point reads (ReadRow)", "read", float64(r.ops)/r.wall.Seconds(), "reads/s")

	r, err = timed(pid, concurrency, func(task int, seq uint64, _ uint64) (uint64, error) {
		m := bigtable.NewMutation()
		m.Set("cf", "v", bigtable.ServerTime, value)
		return 1, wtbl.Apply(ctx, fmt.Sprintf("w%03d-%010d", task, seq), m)
	})
	if err != nil {
		return err
	}
	r.print("single-row writes (Apply)", "write", float64(r.ops)/r.wall.Seconds(), "writes/s")

	r, err = timed(pid, concurrency, func(task int, seq uint64, _ uint64) (uint64, error) {
		keys := make([]string, batch)
		for i := range keys {
			keys[i] = fmt.Sprintf("b%03d-%08d-%04d", task, seq, i)
		}
		return batch, applyBulk(ctx, wtbl, keys, value)
	})
	if err != nil {
		return err
	}
	r.print("batched writes (ApplyBulk x100)", "row", float64(r.ops)/r.wall.Seconds(), "rows/s")

	var scanned uint64
	r, err = timed(pid, 1, func(int, uint64, uint64) (uint64, error) {
		var n, bytes uint64
		err := tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
			n++
			for _, c := range row["cf"] {
				bytes += uint64(len(c.Value))
			}
			return true
		})
		if err != nil {
			return 0, err
		}
		if n != rows {
			return 0, fmt.Errorf("scan saw %d rows, expected %d", n, rows)
		}
		atomic.AddUint64(&scanned, n)
		return bytes, nil
	})
	if err != nil {
		return err
	}
	cpuPerRow := r.cpu / float64(scanned) * 1e6
	fmt.Printf("%-34s %12.1f MB/s     server CPU %6.1f µs/row (%d scans in %.2f s)\n",
		"full scan (ReadRows)", float64(r.ops)/1e6/r.wall.Seconds(), cpuPerRow, len(r.latencies), r.wall.Seconds())
	return nil
}
