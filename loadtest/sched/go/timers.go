// timers: N goroutines (10,000 by default) each sleep 10 ms in a loop, all at once, as a
// server's waiting handlers do. Each sleep's lateness is how much longer than 10 ms it
// took from the call to the goroutine running again. After a warm-up of 0.5 s (the
// sleepers start spread over one period), every sleep that ends in the next 2 s is
// recorded; the figures are the p50, p99 and maximum lateness in microseconds, and
// the sleeps completed per second (ideal: N / 10 ms).
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

func main() {
	n := 10000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	const period = 10 * time.Millisecond
	const warmup = 500 * time.Millisecond
	const measured = 2000 * time.Millisecond
	start := time.Now()
	from := start.Add(warmup)
	until := from.Add(measured)
	late := make([][]int64, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		mine := make([]int64, 0, int(measured/period)+8)
		offset := period * time.Duration(i) / time.Duration(n)
		idx := i
		go func() {
			time.Sleep(offset) // spread the sleepers over one period
			for {
				t0 := time.Now()
				if !t0.Before(until) {
					break
				}
				time.Sleep(period)
				t1 := time.Now()
				if !t1.Before(from) && t1.Before(until) {
					mine = append(mine, int64(t1.Sub(t0)-period))
				}
			}
			late[idx] = mine
			wg.Done()
		}()
	}
	wg.Wait()
	var all []int64
	for _, v := range late {
		all = append(all, v...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	pct := func(q float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(q*float64(len(all)-1))]) / 1e3
	}
	max := 0.0
	if len(all) > 0 {
		max = float64(all[len(all)-1]) / 1e3
	}
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("RESULT name=timer_late_p50 procs=%d unit=us value=%.1f n=%d sleeps=%d\n", procs, pct(0.50), n, len(all))
	fmt.Printf("RESULT name=timer_late_p99 procs=%d unit=us value=%.1f n=%d\n", procs, pct(0.99), n)
	fmt.Printf("RESULT name=timer_late_max procs=%d unit=us value=%.1f n=%d\n", procs, max, n)
	fmt.Printf("RESULT name=timer_sleeps procs=%d unit=per_s value=%.0f n=%d ideal=%.0f\n", procs,
		float64(len(all))/measured.Seconds(), n, float64(n)/period.Seconds())
}
